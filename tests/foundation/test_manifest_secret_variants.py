"""Secrets that `builder check` let through before: a variable named like a secret in lower or
mixed case, a recognisable token under an ordinary name, an engine flag carrying a secret
(`--api-key X`, `--hf-token=X`) in `extra_args` or `command`, a TOML inline table. Each would be
copied into the generated project, images, run evidence (the engine's argv) and records.
Refused at check, exit 2 naming the field, the value never printed; ordinary look-alikes pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "tests/builder/data/smoke.toml").read_text()
HF = "hf_" + "Zq7" * 12  # the shape of a Hugging Face token, made up
SK = "sk-proj-" + "Xy9" * 16

SERVING = '\n[serving.default]\nmodel_path = "meta-llama/Llama-3.1-8B-Instruct"\n'


def _check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    folder = tmp_path / "stacks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "smoke.toml").write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "builder", "check", str(folder / "smoke.toml")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip


def _env(line: str) -> str:
    return SMOKE.replace('STACKGATE_SMOKE = "1"', f'STACKGATE_SMOKE = "1"\n{line}')


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (_env('hf_token = "x-s3cr3t"'), "environment.common.hf_token"),
        (_env('Wandb_Api_Key = "x-s3cr3t"'), "environment.common.Wandb_Api_Key"),
        (_env(f'MY_HF = "{HF}"'), "environment.common.MY_HF"),
        (_env(f'NOTES = "pull with {SK}"'), "environment.common.NOTES"),
        (SMOKE + SERVING + 'extra_args = ["--api-key", "x-s3cr3t"]\n', "serving.default.extra_args.0"),
        (SMOKE + SERVING + 'extra_args = ["--hf-token=x-s3cr3t"]\n', "serving.default.extra_args.0"),
        (SMOKE + SERVING + 'engine = "openai-command"\ncommand = ["srv", "--Admin-Api-Key", "x-s3cr3t"]\n',
         "serving.default.command.1"),
        (SMOKE + SERVING + 'env = { hf_token = "x-s3cr3t" }\n', "serving.default.env.hf_token"),
    ],
    ids=["lower-case-name", "mixed-case-name", "hf-token-shape", "sk-in-free-text", "flag-value",
         "flag-equals", "command-flag", "inline-table"],
)  # fmt: skip
def test_secret_variants_are_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    done = _check(tmp_path, text)
    assert done.returncode == 2, done.stderr
    assert field in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    for secret in ("s3cr3t", HF, SK):
        assert secret not in done.stdout + done.stderr


def test_look_alikes_are_not_secrets(tmp_path: Path) -> None:
    text = (
        _env('SGLANG_MAX_TOKENS = "8"\nTOKENIZERS_PARALLELISM = "false"')
        + SERVING
        + (
            'extra_args = ["--max-total-tokens", "4096", "--api-key-file", "/run/secrets/key", '
            '"--skip-tokenizer-init", "--hf-chat-template-name", "sk-llama-chat"]\n'
        )
    )
    done = _check(tmp_path, text)
    assert done.returncode == 0, done.stderr


def test_records_and_logs_see_tokens_too() -> None:
    """The same shapes are found in any nested data (records, run evidence) and redacted in
    every line a log or error prints."""
    from stackgate.credentials import find_secrets, redact

    found = find_secrets({"checks": [{"evidence": {"argv": ["srv", "--x", HF]}}], "note": "ok"})
    assert found == [("checks.0.evidence.argv.2", "what looks like a hf_ token")]
    assert redact(f"export KEY={SK} && run") == "export KEY=sk-*** && run"
