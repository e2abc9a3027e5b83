"""Run by the env's own interpreter (its text passed with `-c`, so nothing of stackgate and
no module of the working folder is imported): compile the sources a job file lists, each as
`(source, pyc, recorded name)`, into checked-hash `.pyc` files with `jobs` forked workers,
exactly as `python -m compileall --invalidation-mode checked-hash` would. A source that does
not compile is named on one line in compileall's words and the exit code is 1.

    python -c "$(cat pyc_worker.py)" JOB_FILE
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p not in ("", ".")]

import json  # noqa: E402
import multiprocessing  # noqa: E402
import py_compile  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402


def compile_one(item: list[str]) -> str | None:
    source, pyc, recorded = item
    try:
        py_compile.compile(
            source,
            pyc,
            recorded,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
    except py_compile.PyCompileError as err:
        return f"*** Error compiling {source!r}...\n{err.msg}"
    except (SyntaxError, UnicodeError, OSError) as err:
        return f"*** Error compiling {source!r}...\n{type(err).__name__}: {err}"
    return None


def main(job_file: str) -> int:
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    items = job["items"]
    if job["jobs"] > 1 and len(items) > 1:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(job["jobs"], mp_context=context) as pool:
            errors = list(pool.map(compile_one, items, chunksize=32))
    else:
        errors = [compile_one(item) for item in items]
    failed = [e for e in errors if e is not None]
    for error in failed:
        print(error, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
