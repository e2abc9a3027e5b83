"""Re-record uv_pty_install.raw: uv installing three 24 MiB wheels from a local HTTP index,
on a 30x100 pty (two download bars at once). Not run by the tests.

    python tests/builder/data/make_uv_pty_install.py   # from the repository root; uses uv on PATH
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.helpers.wheels import make_index, make_wheel


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wheels = [
            make_wheel(root / "wh", f"big{i}", "1.0",
                       files={f"big{i}/__init__.py": "x = 1\n", f"big{i}/blob.bin": os.urandom(25_000_000)})
            for i in range(3)
        ]
        make_index(root / "idx", wheels)
        server = subprocess.Popen([sys.executable, "-m", "http.server", "-b", "127.0.0.1", "8765",
                                   "-d", str(root / "idx")], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv2")],
                           check=True)
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
            env = dict(os.environ, UV_CACHE_DIR=str(root / "cache"), TERM="xterm-256color")
            child = subprocess.Popen(
                ["uv", "pip", "install", "--python", str(root / "venv2" / "bin" / "python"),
                 "--index-url", "http://127.0.0.1:8765/simple", "big0", "big1", "big2"],
                stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=root)
            os.close(slave)
            drawn = bytearray()
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                drawn += chunk
            child.wait()
        finally:
            server.terminate()
    (Path(__file__).parent / "uv_pty_install.raw").write_bytes(bytes(drawn))


if __name__ == "__main__":
    main()
