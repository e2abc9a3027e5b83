"""How many files of real index projects publish wheel-variant metadata (PEP 825 draft):
a `<name>-<version>-variants.json` file beside the wheels, or a wheel file name with a variant
label (variantlib's wheel-name pattern, the one `validators compat --audit-variants` uses).
Reads only the PEP 691 project pages.

    python benchmarks/compat/variant_census.py torch sgl-kernel sglang-kernel ... > out.json
"""

from __future__ import annotations

import json
import sys
import time

import httpx

from validators.torch_abi.index import project_rows
from validators.torch_abi.variants import variant_label

INDEX = "https://pypi.org/simple"


def census(client: httpx.Client, project: str) -> dict[str, object]:
    rows = project_rows(client, INDEX, project)
    wheels = [r.filename for r in rows if r.filename.endswith(".whl")]
    labelled = [n for n in wheels if variant_label(n)]
    return {
        "project": project,
        "files": len(rows),
        "wheels": len(wheels),
        "variants_json": [r.filename for r in rows if r.filename.endswith("-variants.json")],
        "variant_labelled_wheels": labelled[:10],
        "variant_labelled_count": len(labelled),
    }


def main() -> int:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with httpx.Client(timeout=60, follow_redirects=True) as client:
        rows = [census(client, p) for p in sys.argv[1:]]
    total = {
        "read_at": started,
        "index": INDEX,
        "projects": len(rows),
        "files": sum(int(str(r["files"])) for r in rows),
        "wheels": sum(int(str(r["wheels"])) for r in rows),
        "variants_json": sum(len(r["variants_json"]) for r in rows),  # type: ignore[arg-type]
        "variant_labelled_wheels": sum(int(str(r["variant_labelled_count"])) for r in rows),
    }
    print(json.dumps({"total": total, "projects": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
