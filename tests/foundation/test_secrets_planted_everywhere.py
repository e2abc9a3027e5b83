"""Plant a credential in every input that reaches an output, then grep every output.

Each case runs the real command (a real engine process, a real lock fetch, a real index over
HTTP) with credentials of every shape planted where a user or an attacker could put them:
URL user info, `private_token=`, `X-Amz-Credential=` / `X-Amz-Signature=`, an `hf_` token, a
bearer authorization value. Then stdout, stderr and every file the command left are searched
for each secret's tell-tale part; none may appear. Control: the same planted text is really in
the input (the engine's own stdout, the lock file), so a grep that finds nothing means the
output boundary hid it (stackgate.safe_text), not that it never got there.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import FAST_BENCH, write_stack

ROOT = Path(__file__).resolve().parents[2]
HF = "hf_" + "Qz7" * 12
# each secret's tell-tale part (what must never be printed or kept)
TELLS = ("S3CRETPW", "Qz7Qz7Qz7", "BEARERSECRET123", "AMZCRED42", "AMZSIG99", "PRIVTOK77")
PLANT = (
    "fetching https://alice:S3CRETPW@hub.example/org/model?X-Amz-Credential=AMZCRED42"
    f"&X-Amz-Signature=AMZSIG99 with {HF} and Authorization: Bearer BEARERSECRET123 "
    "from https://git.example/api?private_token=PRIVTOK77"
)


def _leaks(*texts: str, folder: Path | None = None) -> list[str]:
    found = [f"output {i}: {t}" for i, text in enumerate(texts) for t in TELLS if t in text]
    for path in sorted(folder.rglob("*")) if folder is not None else []:
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {t}" for t in TELLS if t.encode() in data]
    return found


def test_an_engine_printing_credentials_leaves_them_in_no_output(tmp_path: Path) -> None:
    """A real engine process prints them (read from its environment, as engines log their
    settings) and crashes: the run report (--json), the terminal lines and the kept engine
    log hold none of them."""
    code = (
        "import os,sys; p=os.environ['PLANT']; print(p, flush=True); "
        "print('Traceback (most recent call last):', flush=True); "
        "print('RuntimeError: ' + p, flush=True); sys.exit(1)"
    )
    profile = {"engine": "openai-command", "model_path": "synthetic",
               "command": [sys.executable, "-c", code], "bench": dict(FAST_BENCH),
               "load_timeout_s": 60, "hang_timeout_s": 60, "stop_grace_s": 5}  # fmt: skip
    manifest = write_stack(tmp_path, "synthetic", {"main": profile})
    out = tmp_path / "out"
    env = {**os.environ, "PLANT": PLANT, "NO_COLOR": "1"}
    control = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert set(TELLS) <= {t for t in TELLS if t in control.stdout}  # the engine does print them
    done = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", str(manifest), "--profile", "main",
         "--json", "--out-dir", str(out), "--env", sys.prefix],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    ready = {r["check"]: r for r in report["results"]}["serve-bench.ready"]
    assert any("https://***@hub.example" in line for line in ready["evidence"]["last_log_lines"])
    assert "Bearer ***" in done.stderr and "hf_***" in done.stderr
    logs = list(out.rglob("*.log"))
    assert logs and "X-Amz-Signature=***" in logs[0].read_text()
    assert _leaks(done.stdout, done.stderr, folder=out) == []


# Settings an engine prints with their values (SGLang logs `server_args=ServerArgs(...)`, vLLM its
# argv and environment), each secret a tell-tale value of its own.
SETTINGS = (
    "server_args=ServerArgs(model_path='m', api_key='PLAINAPIKEY42', admin_api_key=None, "
    "max_total_tokens=5000) argv: --api-key PLAINAPIKEY43 --hf-token=PLAINHFTOK46 config "
    '{"password": "PLAIN PW44", "db_secret": "PLAINSECRET47"} AWS_SECRET_ACCESS_KEY=PLAINAWS45 '
    "HF_TOKEN=PLAINHFTOK48 hf_token: PLAINHFTOK49 private_key='PLAINPK50' #token: 123"
)
SETTING_TELLS = ("PLAINAPIKEY42", "PLAINAPIKEY43", "PLAIN PW44", "PW44", "PLAINAWS45",
                 "PLAINHFTOK46", "PLAINSECRET47", "PLAINHFTOK48", "PLAINHFTOK49", "PLAINPK50")  # fmt: skip


def test_an_engine_printing_its_secret_settings_leaves_them_in_no_output(tmp_path: Path) -> None:
    """A real engine prints its settings with secret values in every shape engines use (a
    Python repr, an argv flag with a space or `=`, JSON, an environment line, YAML): the run
    report (--json), the terminal and every kept file hold none of them; what is no secret
    (`max_total_tokens=5000`, SGLang's `#token: 123`) is kept as printed."""
    code = "import os,sys; print(os.environ['PLANT'], flush=True); sys.exit(1)"
    profile = {"engine": "openai-command", "model_path": "synthetic",
               "command": [sys.executable, "-c", code], "bench": dict(FAST_BENCH),
               "load_timeout_s": 60, "hang_timeout_s": 60, "stop_grace_s": 5}  # fmt: skip
    manifest = write_stack(tmp_path, "synthetic", {"main": profile})
    out = tmp_path / "out"
    env = {**os.environ, "PLANT": SETTINGS, "NO_COLOR": "1"}
    control = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert all(t in control.stdout for t in SETTING_TELLS)  # the engine does print them
    done = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", str(manifest), "--profile", "main",
         "--json", "--out-dir", str(out), "--env", sys.prefix],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    kept = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
    texts = [done.stdout, done.stderr, *kept]
    assert [t for t in SETTING_TELLS for text in texts if t in text] == []
    assert "api_key='***'" in done.stdout and "admin_api_key=None" in done.stdout
    assert "max_total_tokens=5000" in done.stdout and "#token: 123" in done.stdout


def _lock(path: Path, url: str) -> Path:
    wheel = b"not fetched"
    path.write_text(
        "\n".join([
            "version = 1", 'requires-python = "==3.12.*"', "", "[[package]]", 'name = "evil"',
            'version = "1.0"', 'source = { registry = "https://example.invalid/simple" }',
            "wheels = [",
            f'    {{ url = "{url}", hash = "sha256:{hashlib.sha256(wheel).hexdigest()}", '
            f"size = {len(wheel)} }},",
            "]", "",
        ]),
        encoding="utf-8",
    )  # fmt: skip
    return path


def test_a_lock_with_credential_urls_leaves_them_in_no_output(tmp_path: Path) -> None:
    """`static --lock` on an untrusted lock whose wheel URL carries every kind of credential
    (a closed port: the fetch fails and its error names the URL): nothing in the errors,
    the --json or the cache."""
    url = (
        "http://bob:S3CRETPW@127.0.0.1:9/evil-1.0-py3-none-any.whl?private_token=PRIVTOK77"
        f"&X-Amz-Credential=AMZCRED42&X-Amz-Signature=AMZSIG99&t={HF}"
    )
    lock = _lock(tmp_path / "uv.lock", url)
    assert "S3CRETPW" in lock.read_text()  # control: the input holds them
    cache = tmp_path / "cache"
    outputs: list[str] = []
    # refused before any fetch (the URL leads to this host), then fetched and failing
    for extra in ([], ["--json", "--allow-local-urls"]):
        done = subprocess.run(
            [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--cache",
             str(cache), "--request-timeout", "2", "--deadline", "30", *extra],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        assert done.returncode in (1, 2, 3), done.stderr
        assert "127.0.0.1:9" in done.stdout + done.stderr  # the URL is named, its secrets not
        outputs += [done.stdout, done.stderr]
    assert _leaks(*outputs, folder=cache) == []
