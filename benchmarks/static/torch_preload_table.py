"""Per torch version: the preloads read from its torch/__init__.py and the import closure the
static group computes from its files, held to what a real `import torch` maps.

For each env (a venv with one torch): the static side is preloaders.py's reading
(`torch_source_preloads`: always / fallback / guarded / optional) and AbiChecker's
`import_closure` (the files `import torch` leaves loaded). The truth is /proc/self/maps of a
child of the env's interpreter after `import torch`: the shared objects mapped from the env's
site-packages. Differences are printed both ways: read but not mapped (a library the static
group would wrongly count as loaded first, hiding a miss) and mapped but not read (a false
"nothing loads it" FAIL).

    python benchmarks/static/torch_preload_table.py ENV... [--out table.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from validators.static.abi_check import AbiChecker
from validators.static.environment import load_environment
from validators.static.preloaders import torch_source_preloads

MAPS = (
    "import sys, torch\n"
    "site = sys.argv[1]\n"
    "print('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps')"
    " if l.split()[-1].startswith(site) and '.so' in l})))\n"
)


def _ours(path: str) -> bool:
    return any(f"/site-packages/{d}/" in path for d in ("torch", "nvidia", "cusparselt"))


def row(env: Path) -> dict[str, Any]:
    loaded_env = load_environment(env)
    site = loaded_env.site_packages
    version = loaded_env.distributions["torch"].version
    text = (site / "torch" / "__init__.py").read_text(encoding="utf-8", errors="replace")
    pre = torch_source_preloads(text)
    closure = AbiChecker(loaded_env).import_closure
    assert closure is not None
    done = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-c", MAPS, str(site.resolve())],
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/",
    )
    # the libraries torch's import itself loads: torch's and the CUDA wheels' (numpy's, which
    # torch's Python imports, are not part of the loader-side closure)
    mapped_all = {Path(p).name for p in done.stdout.splitlines() if _ours(p)}
    read = {p.name for p in closure.loaded.values() if _ours(str(p))}
    nvidia_read = {
        p.name for p in closure.loaded.values() if "/nvidia/" in str(p) or "/cusparselt/" in str(p)
    }
    nvidia_mapped = {
        Path(p).name for p in done.stdout.splitlines() if "/nvidia/" in p or "/cusparselt/" in p
    }
    return {
        "torch": version,
        "import_ok": done.returncode == 0,
        "error": done.stderr.strip().splitlines()[-1][:200] if done.returncode else "",
        "always": [f"{p.folder}:{p.pattern}" for p in pre if not p.fallback and p.guard is None],
        "guarded": [f"{p.folder}:{p.pattern}" for p in pre if not p.fallback and p.guard],
        "fallback": [f"{p.folder}:{p.pattern}" for p in pre if p.fallback],
        "optional": [f"{p.folder}:{p.pattern}" for p in pre if not p.required],
        "fallback_used": closure.fallback_used,
        "read_files": len(read),
        "mapped_files": len(mapped_all),
        "nvidia_read": sorted(nvidia_read),
        "nvidia_mapped": sorted(nvidia_mapped),
        "read_not_mapped": sorted(read - mapped_all),
        "mapped_not_read": sorted(mapped_all - read),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("envs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for env in args.envs:
        r = row(env)
        rows.append({"env": str(env), **r})
        print(
            f"torch {r['torch']}: import {'ok' if r['import_ok'] else 'FAILS'}; "
            f"always {len(r['always'])}, guarded {len(r['guarded'])}, fallback "
            f"{len(r['fallback'])}; read {r['read_files']} files, mapped {r['mapped_files']}; "
            f"read-not-mapped {r['read_not_mapped']}; mapped-not-read {r['mapped_not_read']}",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    bad = [r for r in rows if r["read_not_mapped"] or r["mapped_not_read"]]
    print(
        f"{'OK' if not bad else 'DIFFERS'}: {len(rows) - len(bad)}/{len(rows)} torch versions agree"
    )
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
