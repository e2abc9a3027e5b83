"""One home for each setting (issue 28 §4): every STACKGATE_* variable the code names is
declared in stackgate/settings.py with its default, meaning and readers; docs/settings.md is
generated from that table; the caches share one root that honours XDG_CACHE_HOME."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate import settings
from stackgate.settings import BY_NAME, NOT_SETTINGS, SETTINGS, markdown

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *(p for pkg in ("stackgate", "builder", "validators") for p in (ROOT / pkg).rglob("*.py")),
    *(ROOT / "fleet").rglob("*.j2"),
    ROOT / "noxfile.py",
    ROOT / ".ci" / "bootstrap",
    ROOT / ".ci" / "run",
]
NAME = re.compile(r"\bSTACKGATE_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def test_docs_settings_is_generated_from_the_registry() -> None:
    assert (ROOT / "docs" / "settings.md").read_text() == markdown(), (
        "run: python -m stackgate.settings --write"
    )


def test_every_variable_the_code_names_is_declared_and_every_declared_one_is_read() -> None:
    named: dict[str, set[str]] = {}
    for path in SOURCES:
        for name in NAME.findall(path.read_text()):
            named.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    undeclared = {n: sorted(w) for n, w in named.items() if n not in BY_NAME and n not in NOT_SETTINGS}
    assert undeclared == {}, "declare them in stackgate/settings.py"
    assert len(BY_NAME) == len(SETTINGS)  # declared once
    for setting in SETTINGS:
        for reader in setting.read_by:
            assert setting.name in (ROOT / reader).read_text(), (setting.name, reader)


def _cache_root(env: dict[str, str]) -> str:
    code = "from stackgate.settings import cache_root; print(cache_root())"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STACKGATE_CACHE")}
    clean.pop("XDG_CACHE_HOME", None)
    done = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=ROOT,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def test_the_caches_have_one_root_that_honours_xdg(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _cache_root({"HOME": str(home)}) == str(home / ".cache" / "stackgate")
    xdg = tmp_path / "xdg"
    assert _cache_root({"HOME": str(home), "XDG_CACHE_HOME": str(xdg)}) == str(xdg / "stackgate")
    # the XDG spec: a relative XDG_CACHE_HOME is ignored
    assert _cache_root({"HOME": str(home), "XDG_CACHE_HOME": "rel"}) == str(home / ".cache/stackgate")
    mine = tmp_path / "mine"
    both = {"XDG_CACHE_HOME": str(xdg), "STACKGATE_CACHE": str(mine)}
    assert _cache_root(both) == str(mine)
    assert _cache_root({"XDG_CACHE_HOME": str(xdg), "STACKGATE_CACHE_DIR": str(mine)}) == str(mine)


def test_every_cache_reader_uses_the_root(tmp_path: Path) -> None:
    code = (
        "from stackgate.envtree.digests import cache_path\n"
        "from validators.elf.facts_cache import default_root as facts\n"
        "from validators.elf.file_facts_cache import default_root as static\n"
        "from validators.static.driver_stub import _cache_root as stubs\n"
        "print(cache_path(), facts(), static(), stubs(), sep='\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKGATE_")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=True)  # fmt: skip
    root = tmp_path / "stackgate"
    assert done.stdout.split() == [
        str(root / "file-digests.sqlite"), str(root / "lockcheck"), str(root / "static"),
        str(root / "driver-stubs"),
    ]  # fmt: skip


def test_one_precedence_flag_then_variable_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "STACKGATE_STORAGE_DRIVER"
    monkeypatch.delenv(name, raising=False)
    assert settings.value(name) == "" and settings.value(name, default="overlay") == "overlay"
    monkeypatch.setenv(name, "")  # set but empty: as unset
    assert settings.value(name, default="overlay") == "overlay"
    monkeypatch.setenv(name, "vfs")
    assert settings.value(name, default="overlay") == "vfs"
    assert settings.value(name, "btrfs", default="overlay") == "btrfs"
    assert settings.value(name, None) == settings.value(name, "") == "vfs"  # no flag given
    for raw, on in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("STACKGATE_KEEP_BUILDS", raw)
        assert settings.switch("STACKGATE_KEEP_BUILDS") is on, raw
    flag = Path("/from/the/flag")
    monkeypatch.setenv("STACKGATE_STATE_DIR", "/dev/null")  # not checked when the flag wins
    assert settings.folder("STACKGATE_STATE_DIR", "test", flag) == flag


# A STACKGATE_* variable read straight from os.environ: the one place reads it (settings).
_RAW_READ = re.compile(r'os\.(?:getenv|environ\.get)\(\s*"STACKGATE_|os\.environ\["STACKGATE_\w+"\]')
# Run where stackgate is not importable: by an env's own interpreter, by nox's.
_WITHOUT_STACKGATE = {"validators/runtime/probes/dist.py", "noxfile.py"}


def test_settings_are_read_in_one_place() -> None:
    readers = {
        str(path.relative_to(ROOT))
        for path in SOURCES
        if path.suffix == ".py" and _RAW_READ.search(path.read_text())
    }
    assert readers - _WITHOUT_STACKGATE - {"stackgate/settings.py"} == set()
