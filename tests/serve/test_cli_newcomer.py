"""serve-bench as a newcomer meets it, through the real CLI: preconditions in seconds instead
of a launch, a crash that shows its log, text that is never parsed as markup, --json and the
exit code in agreement, and --dry-run on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from .conftest import write_stack

ROOT = Path(__file__).resolve().parents[2]


def _serve(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", *[str(a) for a in args]],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """A real (empty) venv to serve from: the precondition checks never start it."""
    path = tmp_path / "env"
    venv.create(path, with_pip=False)
    return path


def _sglang_profile(model: str, **extra: object) -> dict[str, object]:
    return {"engine": "sglang", "model_path": model, "tp": 8, **extra}


def test_a_missing_model_fails_before_any_launch(tmp_path: Path, env: Path) -> None:
    # A profile that serves on CPU: this host could run it, so its missing model is a FAIL.
    profile = _sglang_profile("/nonexistent/Kimi-K2.5", extra_args=["--device", "cpu"])
    stack = write_stack(tmp_path, "kimi", {"main": profile})
    out = tmp_path / "out"
    done = _serve(stack, "--env", env, "--out-dir", out, "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["ok"] is False
    (launch,) = payload["results"]
    assert launch["check"] == "serve-bench.launch" and launch["status"] == "FAIL"
    assert "model_path /nonexistent/Kimi-K2.5 does not exist" in launch["reason"]
    assert launch["evidence"] == {"launched": False}
    assert not (out / "serve-logs").exists()  # nothing was started, so no log
    assert done.stderr.strip().splitlines()[-1].startswith("FAILED serve-bench kimi: 1 checks")


def test_a_missing_draft_model_fails_too(tmp_path: Path, env: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    spec = {"algorithm": "EAGLE3", "draft_model_path": str(tmp_path / "no-draft")}
    profile = _sglang_profile(str(model), speculative=spec, extra_args=["--device", "cpu"])
    stack = write_stack(tmp_path, "kimi", {"main": profile})
    done = _serve(stack, "--env", env, "--out-dir", tmp_path / "out")
    assert done.returncode == 1
    assert "speculative.draft_model_path" in done.stderr and "does not exist" in done.stderr


def test_tp8_on_a_host_without_gpus_is_a_skip_in_seconds(tmp_path: Path, env: Path) -> None:
    # This machine has no NVIDIA GPU (CI's neither); a host with one or more runs the GPU-count
    # and free-memory checks instead (the gpu-marked runs on the lent GPU machine).
    model = tmp_path / "model"
    model.mkdir()
    stack = write_stack(tmp_path, "kimi", {"main": _sglang_profile(str(model))})
    done = _serve(stack, "--env", env, "--out-dir", tmp_path / "out", "--json")
    payload = json.loads(done.stdout)
    (launch,) = payload["results"]
    assert launch["status"] == "SKIP", launch
    assert "profile needs 8 GPU(s) (tp=8)" in launch["reason"]
    # The launch decides serve-bench: skipped, the run is INCOMPLETE (exit 3), never OK.
    assert done.returncode == 3 and payload["ok"] is False, done.stderr
    assert payload["incomplete"].startswith("not decided: serve-bench.launch skipped (")
    assert done.stderr.strip().splitlines()[-1].startswith("INCOMPLETE serve-bench kimi: ")


_CRASH = [sys.executable, "-c", "import sys; sys.exit(1)"]


@pytest.mark.parametrize(
    ("command", "extra_args", "skipped"),
    [
        ([*_CRASH, "--device", "cuda:0"], [], True),  # transformers serve's form
        ([*_CRASH, "--device=cuda"], [], True),
        (_CRASH, ["--device", "cuda:1"], True),  # extra_args come after the command
        ([*_CRASH, "--device", "cuda:0"], ["--device", "cpu"], False),  # the last one counts
        ([*_CRASH, "--device", "cpu"], [], False),
        (_CRASH, [], False),  # no device named: the server's own business, launched
    ],
)
def test_a_command_asking_for_cuda_on_a_host_without_gpus_is_a_skip(
    tmp_path: Path, env: Path, command: list[str], extra_args: list[str], skipped: bool
) -> None:
    # This machine has no NVIDIA GPU (as the test above). A server the profile's command starts
    # and that asks for a CUDA device used to be launched here and crash: FAILED, read as the
    # server's fault, where the truth is "not checked on this host".
    profile = {"engine": "openai-command", "model_path": "synthetic", "command": command,
               "extra_args": extra_args, "load_timeout_s": 60, "hang_timeout_s": 60,
               "stop_grace_s": 5}  # fmt: skip
    stack = write_stack(tmp_path, "cmd", {"main": profile})
    done = _serve(stack, "--env", env, "--out-dir", tmp_path / "out", "--json")
    launch = json.loads(done.stdout)["results"][0]
    if skipped:
        assert launch["status"] == "SKIP", launch
        assert launch["reason"].startswith("the profile's command asks for a CUDA device; ")
        # not launched: what decides serve-bench was skipped, INCOMPLETE and exit 3
        assert launch["evidence"] == {"launched": False} and done.returncode == 3
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("INCOMPLETE serve-bench cmd: 1 checks"), last
        assert "(not decided: serve-bench.launch skipped (the profile's command asks" in last
    else:
        assert launch["status"] == "PASS", launch  # launched; it then exits: ready FAILs
        assert done.returncode == 1


def test_a_crash_shows_the_last_log_lines_and_the_log_path_without_markup(
    tmp_path: Path, env: Path
) -> None:
    # A server that writes a line rich would read as a closing tag, then dies.
    crash = [
        sys.executable,
        "-c",
        "import sys; print('opening [/dev/nvidia0] failed [/oops]', flush=True); sys.exit(1)",
    ]
    stack = write_stack(
        tmp_path,
        "crashy",
        {
            "main": {
                "engine": "openai-command",
                "model_path": "synthetic",
                "command": crash,
                "load_timeout_s": 60,
                "hang_timeout_s": 60,
                "stop_grace_s": 5,
            }
        },
    )
    out = tmp_path / "odd[/x]"
    done = _serve(stack, "--env", env, "--out-dir", out)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "MarkupError" not in done.stderr
    assert "| opening [/dev/nvidia0] failed [/oops]" in done.stderr
    logs = list((out / "serve-logs").glob("*.log"))
    assert len(logs) == 1 and f"log: {logs[0]}" in done.stderr
    # Failures first: the ready FAIL is printed before the launch PASS.
    statuses = [
        line.split()[0]
        for line in done.stderr.splitlines()
        if line.split()[:1] and line.split()[0] in ("PASS", "FAIL", "SKIP", "ERROR")
    ]
    assert statuses[0] == "FAIL" and "PASS" in statuses
    again = _serve(stack, "--env", env, "--out-dir", out, "--json")
    assert json.loads(again.stdout)["ok"] is False and again.returncode == 1


def test_a_stack_named_like_markup_is_a_clean_bad_input(tmp_path: Path, env: Path) -> None:
    stack = write_stack(tmp_path, "oops", {"main": {"engine": "sglang", "model_path": "m"}})
    stack.write_text(stack.read_text().replace('name = "oops"', 'name = "[/oops]"'))
    done = _serve(stack, "--env", env)
    assert done.returncode == 2
    assert "[/oops]" in done.stderr and "Traceback" not in done.stderr


def test_dry_run_prints_the_script_on_stdout(tmp_path: Path) -> None:
    done = _serve("cu130", "--profile", "kimi-k25-tp8", "--topology", "pcie", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "# serve-bench cu130 --profile kimi-k25-tp8"
    assert "export FLASHINFER_CUDA_ARCH_LIST=12.0a" in lines
    assert "-m sglang.launch_server --model-path /models/moonshotai/Kimi-K2.5" in lines[-1]
    assert "sglang.launch_server" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "OK serve-bench cu130 --profile kimi-k25-tp8: dry run, nothing started; "
        "the launch script on stdout"
    )


def test_a_missing_model_on_a_host_without_gpus_is_the_gpu_skip_naming_it(
    tmp_path: Path, env: Path
) -> None:
    """`run cu128` on a CPU host was FAILED by its model path while the README promised a
    SKIP saying what the profile needs: no GPU decides first, and the model is named too."""
    stack = write_stack(tmp_path, "kimi", {"main": _sglang_profile("/nonexistent/Kimi-K2.5")})
    done = _serve(stack, "--env", env, "--out-dir", tmp_path / "out", "--json")
    (launch,) = json.loads(done.stdout)["results"]
    assert launch["status"] == "SKIP", launch
    assert "profile needs 8 GPU(s) (tp=8)" in launch["reason"]
    assert "also: model_path /nonexistent/Kimi-K2.5 does not exist" in launch["reason"]
    assert done.returncode == 3  # INCOMPLETE: the launch that decides was skipped
    assert done.stderr.strip().splitlines()[-1].startswith("INCOMPLETE serve-bench kimi: ")
