"""A path several wheels install holds the copy the lock-order rule chooses (the last owner in
the lock's order by project name), whatever order uv's parallel writes ended in, so builds of
one lock hash equal.

Real wheels built here (tests/helpers/wheels.py) served from a real local index and wheelhouse,
real `builder lock` and `builder build` (uv) several times; real uv installs in both orders for
the settling step alone; the two real PyPI wheels that clash in cu128 (flashinfer-python 0.6.3,
torch-c-dlpack-ext 0.1.5: `build_backend.py`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.venv.clash_settle import settle_clashes
from builder.venv.wheel_record import check_wheel_records
from stackgate.envtree import compute_tree, own_paths_of
from stackgate.errors import EnvironmentProblem
from tests.builder.conftest import run_builder
from tests.helpers.interpreter import PY_MINOR, base_python
from tests.helpers.local_manifest import local_manifest
from tests.helpers.upstream import PinnedWheel, fetch
from tests.helpers.uv_venv import install, venv
from tests.helpers.wheels import make_index, make_wheel

SITE = f"lib/python{PY_MINOR}/site-packages"
# (project, version, files, executable members). The rule's owner of each clashed path:
#   shared_backend.py   alpha / beta / Zed (three owners, different bytes)     -> Zed
#     ("Zed" sorts before "alpha" as text but after it by normalized name: zed)
#   pair.py             alpha / beta (different bytes, beta's executable)      -> beta
#   tool_mode.py        alpha / beta (same bytes, only alpha's executable)     -> beta: plain
#   nsp/__init__.py     alpha / beta / Zed (same bytes and mode)               -> nothing to do
#   share/clash/x.txt   alpha / beta (`.data/data`, outside site-packages)     -> beta
#   bin/tool            alpha / beta (console scripts uv generates)            -> beta
WHEELS: list[tuple[str, str, dict[str, str], tuple[str, ...]]] = [
    (
        "alpha",
        "1.0",
        {
            "alpha/__init__.py": "A = 1\n",
            "shared_backend.py": "WHO = 'alpha'\n",
            "pair.py": "PAIR = 'alpha'\n",
            "tool_mode.py": "MODE = 1\n",
            "nsp/__init__.py": "",
            "alpha-1.0.data/data/share/clash/x.txt": "alpha's data\n",
            "alpha-1.0.dist-info/entry_points.txt": "[console_scripts]\ntool = alpha:main\n",
        },
        ("tool_mode.py",),
    ),
    (
        "beta",
        "2.0",
        {
            "beta/__init__.py": "B = 2\n",
            "shared_backend.py": "WHO = 'beta'\n",
            "pair.py": "PAIR = 'beta'\n",
            "tool_mode.py": "MODE = 1\n",
            "nsp/__init__.py": "",
            "beta-2.0.data/data/share/clash/x.txt": "beta's data\n",
            "beta-2.0.dist-info/entry_points.txt": "[console_scripts]\ntool = beta:main\n",
        },
        ("pair.py",),
    ),
    (
        "Zed",
        "3.0",
        {"zed/__init__.py": "Z = 3\n", "shared_backend.py": "WHO = 'Zed'\n", "nsp/__init__.py": ""},
        (),
    ),
]
CHOSEN = {
    f"{SITE}/shared_backend.py": ("Zed-3.0.dist-info", b"WHO = 'Zed'\n", False),
    f"{SITE}/pair.py": ("beta-2.0.dist-info", b"PAIR = 'beta'\n", True),
    f"{SITE}/tool_mode.py": ("beta-2.0.dist-info", b"MODE = 1\n", False),
    f"{SITE}/nsp/__init__.py": ("Zed-3.0.dist-info", b"", False),
    "share/clash/x.txt": ("beta-2.0.dist-info", b"beta's data\n", False),
    "bin/tool": ("beta-2.0.dist-info", b"from beta import main\n", True),  # a line of it
}


def _wheels(folder: Path) -> list[Path]:
    return [
        make_wheel(folder, name, version, files=files, executable=runnable)
        for name, version, files, runnable in WHEELS
    ]


def _assert_rule_copies(env: Path) -> None:
    for rel, (_owner, data, runnable) in CHOSEN.items():
        held = (env / rel).read_bytes()
        assert (data in held) if rel == "bin/tool" else (held == data), rel
        assert bool((env / rel).stat().st_mode & 0o111) is runnable, rel


def test_every_build_holds_the_rules_copies_and_hashes_equal(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    url = make_index(tmp_path / "index", wheels)
    manifest = tmp_path / "stacks" / "clashes.toml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        local_manifest(
            name="clashes",
            description="three wheels that install the same paths",
            python=PY_MINOR,
            index=url,
            packages={"alpha": "1.0", "beta": "2.0", "zed": "3.0"},
            required=["static"],
        )
    )
    locks = tmp_path / "locks"
    locked = run_builder(["lock", manifest, "--locks-dir", locks, "--python", base_python()])
    assert locked.returncode == 0, locked.stderr
    hashes: list[str] = []
    # three builds from the index (`uv sync`), one offline from the wheelhouse (`uv pip`)
    for attempt, extra in enumerate([[], [], [], ["--wheelhouse", tmp_path / "wheels"]]):
        venvs = tmp_path / f"envs-{attempt}"
        done = run_builder(
            [
                "build",
                manifest,
                "--locks-dir",
                locks,
                "--venv-root",
                venvs,
                "--python",
                base_python(),
                "--json",
                *extra,
            ]
        )
        assert done.returncode == 0, done.stderr
        env = Path(json.loads(done.stdout)["env"])
        record = json.loads((env / "stackgate" / "build-record.json").read_text())
        hashes.append(record["tree"]["sha256"])
        _assert_rule_copies(env)
        clashes = {c["path"]: c for c in record["wheel_records"]["clashes"]}
        assert set(clashes) == set(CHOSEN)
        for rel, (owner, _data, _runnable) in CHOSEN.items():
            assert clashes[rel]["chosen"] == owner, rel
            assert owner in clashes[rel]["holds"], rel
        assert clashes[f"{SITE}/shared_backend.py"]["holds"] == ["Zed-3.0.dist-info"]
        assert "clashes" in record["timings_s"]
        assert "may differ from another build" not in done.stderr
        shutil.rmtree(venvs)
    assert len(set(hashes)) == 1, hashes


def _install_in_order(folder: Path, cache: Path, wheels: list[Path]) -> Path:
    """One `uv pip install` per wheel, in the order given: the last one's copies stay."""
    env = venv(folder, cache)
    for wheel in wheels:
        install(env, cache, wheel)
    return env


def test_settling_gives_the_rules_copy_whatever_order_installed_them(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    cache = tmp_path / "uv-cache"
    trees = []
    for order, ranked in (("rule-last", wheels), ("rule-first", wheels[::-1])):
        env = _install_in_order(tmp_path / order, cache, ranked)
        if order == "rule-first":  # alpha's copies stay where uv left them
            assert (env / SITE / "shared_backend.py").read_text() == "WHO = 'alpha'\n"
            assert (env / SITE / "tool_mode.py").stat().st_mode & 0o111
        settled = {s.path: s for s in settle_clashes(env, cache)}
        assert set(settled) == set(CHOSEN)
        assert all(s.found for s in settled.values())
        assert not settled[f"{SITE}/nsp/__init__.py"].rewritten
        if order == "rule-first":
            assert settled["share/clash/x.txt"].rewritten and settled["bin/tool"].rewritten
            assert settled[f"{SITE}/tool_mode.py"].rewritten  # the mode alone
        _assert_rule_copies(env)
        records = check_wheel_records(env, uv_cache=cache)  # the chosen bytes match a RECORD
        assert {c.path: c.holds for c in records.clashes}[f"{SITE}/pair.py"] == [
            "beta-2.0.dist-info"
        ]
        trees.append(compute_tree(env, own_paths=own_paths_of(env)).sha256)
    assert trees[0] == trees[1]


def test_damage_on_a_clashed_path_is_left_for_the_record_check(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    cache = tmp_path / "uv-cache"
    env = _install_in_order(tmp_path, cache, wheels)
    target = env / SITE / "shared_backend.py"
    target.write_text("WHO = 'someone else'\n")

    settled = {s.path: s for s in settle_clashes(env, cache)}

    assert settled[f"{SITE}/shared_backend.py"].found is False
    assert target.read_text() == "WHO = 'someone else'\n"  # not hidden by a rewrite
    with pytest.raises(EnvironmentProblem) as caught:
        check_wheel_records(env, uv_cache=cache)
    assert any("shared_backend.py" in d for d in caught.value.details)


def test_without_a_verified_copy_the_path_stays_and_says_so(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    cache = tmp_path / "uv-cache"
    env = _install_in_order(tmp_path, cache, wheels[::-1])
    for copy in cache.glob("archive-v*/*/Zed-3.0.dist-info"):
        backend = copy.parent / "shared_backend.py"
        os.chmod(backend, 0o644)
        backend.write_text("WHO = 'a damaged cache copy'\n")

    # no cache at all: every path holding another owner's bytes in a wheel stays as uv left it
    # (bin/tool is made from the env alone)
    assert {s.path for s in settle_clashes(env, None) if not s.found} == {
        f"{SITE}/shared_backend.py",
        f"{SITE}/pair.py",
        "share/clash/x.txt",
    }
    settled = {s.path: s for s in settle_clashes(env, cache)}

    assert settled[f"{SITE}/shared_backend.py"].found is False  # its one copy is damaged
    assert (env / SITE / "shared_backend.py").read_text() == "WHO = 'alpha'\n"
    assert settled[f"{SITE}/pair.py"].found and settled[f"{SITE}/pair.py"].rewritten


_XY = PY_MINOR.replace(".", "")
FLASHINFER = PinnedWheel("flashinfer-python", "flashinfer_python-0.6.3-py3-none-any.whl")
DLPACK_EXT = PinnedWheel(
    "torch-c-dlpack-ext",
    f"torch_c_dlpack_ext-0.1.5-cp{_XY}-cp{_XY}-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
)


def _record_sha(env: Path, dist: str, row: str) -> bytes:
    for line in (env / SITE / dist / "RECORD").read_text().splitlines():
        path, digest, _size = line.rsplit(",", 2)
        if path == row:
            return base64.urlsafe_b64decode(digest.removeprefix("sha256=") + "==")
    raise AssertionError(f"{row} not in {dist}'s RECORD")


@pytest.mark.network
@pytest.mark.xdist_group("upstream-wheels")
def test_cu128s_build_backend_clash_holds_torch_c_dlpack_exts_copy(tmp_path: Path) -> None:
    fi, dl = fetch(FLASHINFER), fetch(DLPACK_EXT)
    cache = tmp_path / "uv-cache"
    trees = []
    for order, wheels in (("dlpack-last", [fi, dl]), ("flashinfer-last", [dl, fi])):
        env = _install_in_order(tmp_path / order, cache, wheels)
        (item,) = [s for s in settle_clashes(env, cache) if s.path.endswith("build_backend.py")]
        assert item.chosen == "torch_c_dlpack_ext-0.1.5.dist-info" and item.found
        assert item.rewritten is (order == "flashinfer-last")
        held = hashlib.sha256((env / SITE / "build_backend.py").read_bytes()).digest()
        assert held == _record_sha(env, item.chosen, "build_backend.py")
        assert held != _record_sha(env, "flashinfer_python-0.6.3.dist-info", "build_backend.py")
        trees.append(compute_tree(env, own_paths=own_paths_of(env)).sha256)
    assert trees[0] == trees[1]



@pytest.mark.parametrize(
    ("alpha_spec", "beta_spec"),
    [("alpha:main", "beta:main"), ("alpha.cli:run", "beta:App.start")],  # module paths, a method
)
def test_a_script_uv_generates_for_two_owners_is_the_rules(
    tmp_path: Path, alpha_spec: str, beta_spec: str
) -> None:
    # uv writes `bin/tool` for each wheel's console script; its bytes are in no wheel, so the
    # chosen owner's is rebuilt from the one uv left and kept only under its RECORD's sha256
    sources = {
        "alpha": {
            "alpha/__init__.py": "def main():\n    return 0\n",
            "alpha/cli.py": "def run():\n    return 0\n",
        },
        "beta": {
            "beta/__init__.py": "class App:\n    @staticmethod\n    def start():\n        return 0\n\n\n"
            "def main():\n    return 0\n",
        },
    }
    wheels = [
        make_wheel(
            tmp_path / "wheels",
            name,
            "1.0",
            files={
                **sources[name],
                f"{name}-1.0.dist-info/entry_points.txt": f"[console_scripts]\ntool = {spec}\n",
            },
        )
        for name, spec in (("alpha", alpha_spec), ("beta", beta_spec))
    ]
    cache = tmp_path / "uv-cache"
    held = []
    for order, ranked in (("rule-last", wheels), ("rule-first", wheels[::-1])):
        env = _install_in_order(tmp_path / order, cache, ranked)
        if order == "rule-first":
            assert b"from alpha" in (env / "bin" / "tool").read_bytes()  # uv left alpha's
        (item,) = settle_clashes(env, cache)
        assert item.path == "bin/tool" and item.chosen == "beta-1.0.dist-info" and item.found
        assert item.rewritten is (order == "rule-first")
        script = (env / "bin" / "tool").read_bytes()
        assert b"from beta import" in script and (env / "bin" / "tool").stat().st_mode & 0o111
        (clash,) = check_wheel_records(env, uv_cache=cache).clashes
        assert clash.holds == ["beta-1.0.dist-info"] == [clash.chosen]
        held.append(script.replace(str(env).encode(), b"<env>"))
        ran = subprocess.run([env / "bin" / "tool"], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr  # the rebuilt script runs the chosen entry point
    assert held[0] == held[1]


def test_a_script_the_rule_cannot_rebuild_stays_as_uv_wrote_it(tmp_path: Path) -> None:
    # beta's entry point is not a `module:attr` uv's template takes: nothing is made up
    wheels = [
        make_wheel(tmp_path / "wheels", name, "1.0", files={
            f"{name}/__init__.py": "def main():\n    return 0\n",
            f"{name}-1.0.dist-info/entry_points.txt": f"[console_scripts]\ntool = {spec}\n",
        })
        for name, spec in (("alpha", "alpha:main"), ("beta", "beta:main"))
    ]
    cache = tmp_path / "uv-cache"
    env = _install_in_order(tmp_path, cache, wheels[::-1])
    entry = env / SITE / "beta-1.0.dist-info" / "entry_points.txt"
    entry.write_text("[console_scripts]\ntool = beta\n")  # as if another template made it
    before = (env / "bin" / "tool").read_bytes()

    (item,) = settle_clashes(env, cache)

    assert item.found is False and not item.rewritten
    assert (env / "bin" / "tool").read_bytes() == before
