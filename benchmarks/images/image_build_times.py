"""Time the real buildah path on this host and record the digests (no claim beyond these numbers).

    .venv/bin/python benchmarks/images/image_build_times.py [--with-tool]   # needs buildah; --with-tool needs PyPI

Steps: local base image (busybox + this CPython) and uv image into a fresh vfs store; the tiny
stack locked against an index on 127.0.0.1; `python -m builder image --check-reproducible
--output oci-archive:...` (two builds); digests read back with skopeo. Writes JSON to stdout and
to benchmarks/images/results/image_build_times.json.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from builder.lock.resolve import run_lock  # noqa: E402
from stackgate.layout import LockFiles  # noqa: E402
from stackgate.manifest.loading import load_stack  # noqa: E402
from stackgate.python_finder import Interpreter  # noqa: E402
from tests.helpers.interpreter import PY_MINOR  # noqa: E402
from tests.helpers.localbase import make_base_image, make_uv_image  # noqa: E402
from tests.helpers.tiny_image import TINY_MANIFEST, QuietHandler  # noqa: E402
from tests.helpers.wheels import make_index, make_wheel  # noqa: E402


def main() -> None:
    with_tool = "--with-tool" in sys.argv
    work = Path(tempfile.mkdtemp(prefix="stackgate-bench-image-"))
    out: dict[str, object] = {"host_cpus": len(os.sched_getaffinity(0)), "with_tool": with_tool}
    try:
        index_root = work / "index"
        wheels = [
            make_wheel(index_root / "wheels", "tinyapp", "1.0", requires=["tinydep>=1"]),
            make_wheel(index_root / "wheels", "tinydep", "2.0"),
        ]
        make_index(index_root, wheels)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(index_root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/simple"

        store = work / "store"
        t0 = time.monotonic()
        base = make_base_image(store, work / "rootfs")
        uv = make_uv_image(store, work / "rootfs")
        out["local_base_and_uv_images_s"] = round(time.monotonic() - t0, 2)

        manifest = work / "tiny.toml"
        manifest.write_text(TINY_MANIFEST.format(python=PY_MINOR, index=url))
        loaded = load_stack(manifest)
        files = LockFiles(work / "locks" / "tiny")
        t0 = time.monotonic()
        run_lock(loaded, files, Interpreter(Path(sys.executable), ".".join(map(str, sys.version_info[:3])), "--python"), index_map={})
        out["lock_s"] = round(time.monotonic() - t0, 2)

        archive = work / "tiny.oci.tar"
        argv = [
            sys.executable, "-m", "builder", "image", str(manifest), "--engine", "buildah",
            "--lock-dir", str(files.folder), "--base", base.pinned, "--uv-image", uv.pinned,
            "--base-python", base.python, "--storage-root", str(store), "--storage-driver", "vfs",
            "--output", f"oci-archive:{archive}", "--check-reproducible", "--json",
        ]
        if not with_tool:
            argv.append("--no-tool")
        elif Path("/etc/ssl/certs/ca-certificates.crt").is_file():
            argv += ["--ca-bundle", os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")]
        env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        out["check_reproducible_total_s"] = round(time.monotonic() - t0, 2)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr)
        result = json.loads(done.stdout)
        out["first_build_s"] = result["seconds"]
        out["reproducible"] = result["reproducible"]
        out["image_id"] = result["image_id"]
        out["archive_digest"] = result["archive_digest"]
        out["archive_bytes"] = archive.stat().st_size
        skopeo = json.loads(subprocess.run(["skopeo", "inspect", f"oci-archive:{archive}"], capture_output=True, text=True, check=True).stdout)
        out["skopeo_digest"] = skopeo["Digest"]
        out["base_digest"] = base.digest
        server.shutdown()
        server.server_close()
    finally:
        g = ["--root", str(work / "store" / "root"), "--runroot", str(work / "store" / "run"), "--storage-driver", "vfs"]
        subprocess.run(["buildah", *g, "rmi", "--all", "--force"], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2, sort_keys=True)
    print(text)
    name = "image_build_times_with_tool.json" if with_tool else "image_build_times.json"
    (ROOT / "benchmarks" / "images" / "results" / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
