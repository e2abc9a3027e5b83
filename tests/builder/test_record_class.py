"""Every way an installed file legitimately differs from, or is absent from, its wheel's RECORD,
on real uv installs into real venvs; none of them is damage, and real damage of each kind still
is.

- files uv generates or rewrites: console and GUI scripts, a `.data/scripts` file whose
  `#!python` uv rewrites to the env's interpreter, INSTALLER, REQUESTED, direct_url.json (from a
  file, not from an index), uv_cache.json: uv writes their new hashes into RECORD;
- `.data/` scripts, headers, data and purelib, whose RECORD rows leave site-packages
  (`../../../bin/...`);
- a `.pth` a wheel ships (in RECORD) and the ones the builder (`--base-site`, the env
  profile) or a later tool writes (in none);
- RECORD itself and rows with no hash (not judged);
- a path claimed by several owners with and without hashes;
- symlinked files (inside the env: judged by what they point at; out of it: refused) and an env
  reached through a symlink (`current`);
- the tree hash's one pass: its raw digests judge the same as reading again, although the tree
  digest of a file naming the env's path differs from the file's sha256;
- packages installed over a `--base-site` image (its RECORDs are not the env's);
- namespace packages split across real nvidia-* wheels from PyPI (`nvidia/__init__.py`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from builder.venv.wheel_record import check_wheel_records
from stackgate.envtree import compute_tree, own_paths_of
from stackgate.envtree.wheel_records import judge, read_claims
from tests.builder.conftest import PY_MINOR, LocalStack
from tests.helpers.upstream import PinnedWheel, fetch
from tests.helpers.uv_venv import install, site, venv
from tests.helpers.wheels import make_index, make_wheel
from validators.static.file_clashes import clash_result

KITCHEN_FILES = {
    "kitchen/__init__.py": "def main():\n    print('hi')\n",
    "kitchen/unhashed.txt": "listed without a hash\n",
    "kitchen-1.0.dist-info/entry_points.txt": (
        "[console_scripts]\nkitchen-cli = kitchen:main\n[gui_scripts]\nkitchen-gui = kitchen:main\n"
    ),
    "kitchen-1.0.data/scripts/kitchen-tool": "#!python\nprint(1)\n",
    "kitchen-1.0.data/scripts/kitchen-sh": "#!/bin/sh\necho 1\n",
    "kitchen-1.0.data/headers/kitchen.h": "int k;\n",
    "kitchen-1.0.data/data/share/kitchen/readme.txt": "data\n",
    "kitchen-1.0.data/purelib/kitchen_pure.py": "P = 1\n",
    "kitchen_hook.pth": "kitchen_extra\n",
}


def _kitchen(root: Path) -> Path:
    return make_wheel(root, "kitchen", "1.0", files=KITCHEN_FILES, unhashed=["kitchen/unhashed.txt"])


def _installed(tmp_path: Path, source: str) -> Path:
    cache = tmp_path / "uv-cache"
    env = venv(tmp_path, cache)
    wheel = _kitchen(tmp_path / "wheels")
    if source == "file":
        install(env, cache, wheel)
    else:
        install(env, cache, "kitchen==1.0", index=make_index(tmp_path / "index", [wheel]))
    return env


@pytest.mark.parametrize("source", ["file", "index"])
def test_generated_and_rewritten_files_match_what_uv_wrote_into_record(
    tmp_path: Path, source: str
) -> None:
    env = _installed(tmp_path, source)
    info = site(env) / "kitchen-1.0.dist-info"
    assert (info / "direct_url.json").is_file() == (source == "file")
    tool = (env / "bin" / "kitchen-tool").read_text()
    assert tool.startswith(f"#!{env}/bin/python")  # rewritten: not the wheel's bytes

    claims = read_claims(env)
    judged = judge(claims)

    assert judged.damaged == [] and judged.clashes == []
    checked = {rel for rel, cs in claims.by_path.items() if any(c.digest for c in cs)}
    expected = {
        "bin/kitchen-cli", "bin/kitchen-gui", "bin/kitchen-tool", "bin/kitchen-sh",
        f"include/site/python{PY_MINOR}/kitchen/kitchen.h", "share/kitchen/readme.txt",
        f"lib/python{PY_MINOR}/site-packages/kitchen_pure.py",
        f"lib/python{PY_MINOR}/site-packages/kitchen_hook.pth",
        *(f"lib/python{PY_MINOR}/site-packages/kitchen-1.0.dist-info/{name}"
          for name in ("INSTALLER", "REQUESTED", "METADATA", "WHEEL", "uv_cache.json")),
    }
    assert expected <= checked
    assert judged.checked == len(checked)
    not_judged = {rel for rel, cs in claims.by_path.items() if not any(c.digest for c in cs)}
    assert not_judged == {
        f"lib/python{PY_MINOR}/site-packages/kitchen-1.0.dist-info/RECORD",
        f"lib/python{PY_MINOR}/site-packages/kitchen/unhashed.txt",
    }
    # a .pth no RECORD lists (written by a tool after the install): not judged, never refused
    (site(env) / "added_later.pth").write_text("/nowhere\n")
    assert judge(read_claims(env)).damaged == []


def test_the_tree_hash_pass_feeds_the_record_check(tmp_path: Path) -> None:
    env = _installed(tmp_path, "file")
    tree = compute_tree(env, own_paths=own_paths_of(env))
    entries = {rel: digest for rel, _kind, digest in tree.entries}
    # bin/kitchen-tool names the env's path: its tree digest is normalized, its raw one is not
    assert entries["bin/kitchen-tool"] != tree.raw["bin/kitchen-tool"]
    assert tree.raw.keys() >= {rel for rel, kind, _ in tree.entries if kind in ("F", "X")}

    records = check_wheel_records(env, tree.raw)
    assert records.files_checked == judge(read_claims(env)).checked
    # and a digest that is not the file's is caught from the pass alone
    forged = {**tree.raw, "bin/kitchen-tool": entries["bin/kitchen-tool"]}
    assert [d.path for d in judge(read_claims(env), forged).damaged] == ["bin/kitchen-tool"]


@pytest.mark.parametrize(
    ("edit", "kind"),
    [
        ("bin/kitchen-cli", "differs"),  # a generated console script edited
        ("bin/kitchen-tool", "differs"),  # a rewritten .data script edited
        ("kitchen-1.0.dist-info/INSTALLER", "differs"),  # uv's bookkeeping edited
        ("kitchen/__init__.py", "missing"),
        ("kitchen/unhashed.txt", None),  # no hash listed: nothing to judge it by
    ],
)
def test_damage_of_each_kind_is_still_damage(tmp_path: Path, edit: str, kind: str | None) -> None:
    env = _installed(tmp_path, "file")
    target = env / edit if edit.startswith("bin/") else site(env) / edit
    if kind == "missing" or kind is None:
        target.unlink()
    else:
        target.write_bytes(target.read_bytes() + b"# edited\n")

    damaged = judge(read_claims(env)).damaged

    assert [d.kind for d in damaged] == ([kind] if kind else [])


def test_owners_with_and_without_hashes(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = venv(tmp_path, cache)
    wheels = tmp_path / "wheels"
    hashed = make_wheel(wheels, "one", "1.0", files={"one/__init__.py": "", "both.txt": "A\n", "bare.txt": "x\n"},
                        unhashed=["bare.txt"])
    bare = make_wheel(wheels, "two", "1.0", files={"two/__init__.py": "", "both.txt": "B\n", "bare.txt": "y\n"},
                      unhashed=["both.txt", "bare.txt"])
    install(env, cache, hashed)
    install(env, cache, bare)  # writes its both.txt over one's: the file matches no hash listed

    claims = read_claims(env)
    judged = judge(claims)

    prefix = f"lib/python{PY_MINOR}/site-packages/"
    # one's RECORD hashes both.txt, two's lists it bare: the file is two's, which nothing can
    # confirm; that is reported as damage (it matches the only hash listed by none)
    assert [(d.path, d.kind) for d in judged.damaged] == [(prefix + "both.txt", "differs")]
    (clash,) = judged.clashes
    assert clash.path == prefix + "bare.txt" and clash.holds == [] and not clash.same_bytes

    (site(env) / "both.txt").write_text("A\n")  # one's copy: matches one's RECORD
    (clash_both,) = [c for c in judge(claims).clashes if c.path.endswith("both.txt")]
    assert clash_both.holds == ["one-1.0.dist-info"] and clash_both.same_bytes is False


def test_symlinked_files_and_a_symlinked_env(tmp_path: Path) -> None:
    env = _installed(tmp_path, "file")
    module = site(env) / "kitchen" / "__init__.py"
    inside = env / "share" / "kitchen" / "copy.py"
    shutil.copyfile(module, inside)
    module.unlink()
    module.symlink_to(os.path.relpath(inside, module.parent))  # same bytes, through a link

    assert judge(read_claims(env)).damaged == []
    link = tmp_path / "current"
    link.symlink_to(env)
    assert judge(read_claims(link)).damaged == []  # an env named through `current`

    outside = tmp_path / "elsewhere.py"
    shutil.copyfile(inside, outside)
    module.unlink()
    module.symlink_to(outside)  # same bytes, but they live outside the env
    (found,) = judge(read_claims(env)).damaged
    assert found.kind == "outside" and found.path.endswith("kitchen/__init__.py")


def test_an_env_over_a_base_site_judges_only_its_own_records(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    host = local_stack.root / "host" / "lib" / f"python{PY_MINOR}" / "site-packages"
    (host / "numpy").mkdir(parents=True)
    (host / "numpy" / "__init__.py").write_text("WHERE = 'host'\n")
    info = host / "numpy-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.0.0\n\n")
    # the host's RECORD lies about its file and names the env's numpy path: neither is ours
    (info / "RECORD").write_text("numpy/__init__.py,sha256=AAAA,1\nnumpy-1.0.0.dist-info/RECORD,,\n")

    done = local_stack.build("--base-site", host, "--json")

    assert done.returncode == 0, done.stderr
    env = Path(json.loads(done.stdout)["env"])
    record = json.loads((env / "stackgate" / "build-record.json").read_text())
    assert record["wheel_records"]["clashes"] == []
    assert record["wheel_records"]["files_checked"] > 0
    # the .pth files the builder writes (base site, env profile) are in no RECORD: not judged
    assert (site(env) / "_stackgate_base_site.pth").is_file()
    assert (site(env) / "_stackgate_env_profile.pth").is_file()
    assert not any(rel.endswith(".pth") for rel in read_claims(env).by_path)


NVTX = PinnedWheel(
    "nvidia-nvtx-cu12",
    "nvidia_nvtx_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
)
CUDART = PinnedWheel(
    "nvidia-cuda-runtime-cu12",
    "nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
)


@pytest.mark.network
@pytest.mark.xdist_group("upstream-wheels")
def test_a_namespace_split_across_real_nvidia_wheels_is_a_same_bytes_clash(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = venv(tmp_path, cache)
    install(env, cache, fetch(NVTX), fetch(CUDART))

    records = check_wheel_records(env)

    shared = f"lib/python{PY_MINOR}/site-packages/nvidia/__init__.py"
    (clash,) = [c for c in records.clashes if c.path == shared]
    assert clash.same_bytes and clash.holds == clash.owners == [
        "nvidia_cuda_runtime_cu12-12.8.90.dist-info",
        "nvidia_nvtx_cu12-12.8.90.dist-info",
    ]
    result = clash_result(env)
    assert result.status == "PASS" and result.reason.startswith("INFO: ")
    assert result.evidence["severity"] == "INFO" and shared in result.evidence["same_bytes"]
