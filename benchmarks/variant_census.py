"""How many files of real index projects publish wheel-variant metadata (PEP 825 draft):
a `*-variants.json` file beside the wheels, or a wheel file name with a variant label (one
dash-separated part more than PEP 427's). Reads only the PEP 691 project pages.

    python benchmarks/variant_census.py torch sgl-kernel sglang-kernel ... > out.json
"""

from __future__ import annotations

import json
import sys

import httpx

INDEX = "https://pypi.org/simple"


def census(client: httpx.Client, project: str) -> dict[str, object]:
    page = client.get(
        f"{INDEX}/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    ).json()
    names = [f["filename"] for f in page["files"]]
    wheels = [n for n in names if n.endswith(".whl")]
    labelled = [n for n in wheels if len(n[:-4].split("-")) not in (5, 6)]
    labelled += [
        n for n in wheels if len(n[:-4].split("-")) == 6 and not n.split("-")[2][:1].isdigit()
    ]
    return {
        "project": project,
        "files": len(names),
        "wheels": len(wheels),
        "variants_json": [n for n in names if n.endswith("-variants.json")],
        "variant_labelled_wheels": labelled[:10],
        "variant_labelled_count": len(labelled),
    }


def main() -> int:
    with httpx.Client(timeout=60, follow_redirects=True) as client:
        rows = [census(client, p) for p in sys.argv[1:]]
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
