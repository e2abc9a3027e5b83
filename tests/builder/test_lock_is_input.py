"""Issue 23 section 1: the lock is input, not authority. A uv.lock edited after `lock` (URLs
with encoded separators, another package's file name, a wheel on another host or path with
its own correct sha256, another registry, a direct-URL source) is refused by `wheelhouse` and
`build` before a byte is downloaded or a folder created (exit 2, naming the lock and the
package); and `wheelhouse` downloads through the bounded reader (a flooding or dripping file
server is cut off, exit 3, naming the wheel and the bound).

Real parts: the builder tests' three PEP 503 indexes served over HTTP on 127.0.0.1, locked by
real uv; an attacker's server on another port; a real planted wheel whose import would write a
file.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from stackgate.bounded_http import Limits
from stackgate.errors import BadInput
from stackgate.manifest.loading import load_stack
from tests.builder.conftest import ROOT, LocalStack, builder_env, write_manifest
from tests.helpers.hostile import HostileServer, hostile_server
from tests.helpers.wheels import make_index, make_wheel
from validators.lockcheck.origin import OriginChecked, check_lock_origin, origin_result

ONLINE = {"UV_OFFLINE": ""}  # loopback only
NUMPY = "numpy-2.0.0-py3-none-any.whl"


@dataclass
class Served:
    stack: LocalStack
    server: HostileServer
    base: str  # http://127.0.0.1:PORT

    @property
    def lockfile(self) -> Path:
        return self.stack.locks / "localstack" / "uv.lock"

    def edit(self, old: str, new: str) -> None:
        text = self.lockfile.read_text(encoding="utf-8")
        assert old in text, old
        self.lockfile.write_text(text.replace(old, new), encoding="utf-8")

    def numpy_url(self) -> str:
        return f"{self.base}/idx-pypi/simple/numpy/{NUMPY}"

    def wheelhouse(self, *extra: str) -> tuple[int, str, Path]:
        house = self.stack.root / "house"
        done = self.stack.cli(
            "wheelhouse", self.stack.manifest, "--locks-dir", self.stack.locks, "--to", house,
            *extra, env=ONLINE,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stderr, house

    def static(self, *extra: str) -> tuple[int, str]:
        """`validators static STACK --lock`: the pre-install verdict on the (edited) lock."""
        done = subprocess.run(
            [sys.executable, "-m", "validators", "static", str(self.stack.manifest), "--lock",
             str(self.lockfile), "--cache", str(self.stack.root / "facts"), "--json", *extra],
            env=builder_env(ONLINE), capture_output=True, text=True, timeout=300, cwd=ROOT,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stdout + done.stderr


@pytest.fixture
def served(local_stack: LocalStack) -> Iterator[Served]:
    with hostile_server(local_stack.root) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        urls = {"pypi": f"{base}/idx-pypi/simple", "cuda": f"{base}/idx-cuda/simple",
                "kernel": f"{base}/idx-kernel/simple"}
        local_stack.manifest = write_manifest(local_stack.root / "stacks", "localstack", urls)
        lock = local_stack.lock(env=ONLINE)
        assert lock.returncode == 0, lock.stderr
        yield Served(local_stack, server, base)


def _encoded_path(target: Path) -> str:
    return "%2F".join(quote(part, safe="") for part in str(target).split("/"))


NAMES = {
    "encoded-absolute-path-and-query": lambda t: f"{_encoded_path(t / 'PWNED')}?x/{NUMPY}",
    "encoded-dot-dot": lambda t: f"..%2F..%2F..%2F{NUMPY}",
    "encoded-backslash": lambda t: f"..%5C{NUMPY}",
    "encoded-nul": lambda t: f"{NUMPY}%00.whl",
    "dot-dot-segment": lambda t: "..",
    "another-package": lambda t: "evil-2.0.0-py3-none-any.whl",
    "another-version": lambda t: "numpy-9.9.9-py3-none-any.whl",
    "hidden-name": lambda t: f".{NUMPY}",
}


@pytest.mark.parametrize("attack", sorted(NAMES))
def test_file_names_come_from_the_validated_wheel_name(served: Served, attack: str) -> None:
    outside = served.stack.root / "outside"
    outside.mkdir()
    served.edit(served.numpy_url(), f"{served.base}/idx-pypi/simple/numpy/{NAMES[attack](outside)}")
    code, err, house = served.wheelhouse()
    assert code == 2, err
    assert "uv.lock" in err and "numpy" in err, err
    assert not house.exists()
    assert not list(outside.iterdir()) and not (served.stack.root / NUMPY).exists()


def test_sdist_name_is_validated_too(served: Served) -> None:
    """An sdist entry whose URL climbs out with encoded `..` (issue 23's second example)."""
    block = _block(served, "numpy")
    sdist = f'sdist = {{ url = "{served.base}/idx-pypi/simple/numpy/..%2F..%2Fnumpy-2.0.0.tar.gz", hash = "sha256:{"1" * 64}" }}\n'
    served.edit(block, block.replace("wheels = [", sdist + "wheels = [", 1))
    code, err, house = served.wheelhouse()
    assert code == 2 and "sdist" in err and "numpy" in err, err
    assert not house.exists()


def _evil_numpy(folder: Path, sentinel: Path) -> Path:
    return make_wheel(folder, "numpy", "2.0.0",
                      files={"numpy/__init__.py": f"open({str(sentinel)!r}, 'w').write('x')\n"})


def _point_numpy_at(served: Served, url: str, wheel: Path) -> None:
    text = served.lockfile.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if served.numpy_url() in ln)
    data = wheel.read_bytes()
    new = re.sub(r'url = "[^"]*"', f'url = "{url}"', line)
    new = re.sub(r'hash = "sha256:[0-9a-f]+"', f'hash = "sha256:{hashlib.sha256(data).hexdigest()}"', new)
    new = re.sub(r"size = \d+", f"size = {len(data)}", new)
    served.edit(line, new)


def test_wheel_on_another_host_with_its_own_sha256_is_refused_before_download(
    served: Served, tmp_path: Path
) -> None:
    sentinel = tmp_path / "PLANTED"
    evil = _evil_numpy(tmp_path / "attacker", sentinel)
    with hostile_server(tmp_path / "attacker") as attacker:
        _point_numpy_at(served, f"{attacker.base}{evil.name}", evil)
        code, err, house = served.wheelhouse()
        assert code == 2, err
        assert "is not a file index" in err and "numpy" in err, err
        built = served.stack.build("--json", env=ONLINE)
        assert built.returncode == 2, built.stderr
        assert "is not a file index" in built.stderr
        assert not [p for p in attacker.requests if p.endswith(".whl")]  # never downloaded
    assert not house.exists() and not sentinel.exists()
    assert not served.stack.stack_dir.exists() or not list(served.stack.stack_dir.glob("*-env*"))


def test_wheel_on_the_index_host_but_not_on_its_page_is_refused(
    served: Served, tmp_path: Path
) -> None:
    evil = _evil_numpy(served.stack.root / "elsewhere", tmp_path / "PLANTED")
    _point_numpy_at(served, f"{served.base}/elsewhere/{evil.name}", evil)
    code, err, _ = served.wheelhouse()
    assert code == 2 and "is not a file index" in err, err


def test_listed_file_with_another_sha256_in_the_lock_is_refused(served: Served) -> None:
    text = served.lockfile.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if served.numpy_url() in ln)
    served.edit(line, re.sub(r"sha256:[0-9a-f]+", "sha256:" + "0" * 64, line))
    code, err, _ = served.wheelhouse()
    assert code == 2 and "the index lists sha256" in err, err


def _block(served: Served, name: str) -> str:
    """The lock's [[package]] entry of `name` (not another entry that depends on it)."""
    text = served.lockfile.read_text(encoding="utf-8")
    return next(b for b in text.split("[[package]]") if b.lstrip().startswith(f'name = "{name}"'))


def test_package_moved_to_another_registry_is_refused(served: Served, tmp_path: Path) -> None:
    """The attacker's own index lists its wheel: only the manifest decides where numpy comes
    from, so the lock's registry is refused before any page is read."""
    evil = _evil_numpy(tmp_path / "w", tmp_path / "PLANTED")
    make_index(tmp_path / "attacker", [evil])
    with hostile_server(tmp_path / "attacker") as attacker:
        block = _block(served, "numpy")
        moved = block.replace(f"{served.base}/idx-pypi/simple", f"{attacker.base}simple")
        served.edit(block, moved)
        code, err, _ = served.wheelhouse()
        assert code == 2, err
        assert "locked from index" in err and "the manifest allows 'pypi'" in err, err
        assert not attacker.requests


def test_pinned_package_from_an_open_index_is_refused(served: Served) -> None:
    """torch is pinned to the explicit cuda index; the same file from the pypi index's URL
    (uv would never lock that) is refused."""
    block = _block(served, "torch")
    assert "/idx-cuda/simple" in block
    served.edit(block, block.replace("/idx-cuda/simple", "/idx-pypi/simple"))
    code, err, _ = served.wheelhouse()
    assert code == 2 and "the manifest allows 'pytorch-cu130'" in err, err


def test_direct_url_source_is_refused(served: Served, tmp_path: Path) -> None:
    block = _block(served, "numpy")
    source = re.search(r"source = \{[^}]*\}", block)
    assert source is not None
    served.edit(block, block.replace(source.group(0),
                                     f'source = {{ url = "{served.base}/x/{NUMPY}" }}'))
    built = served.stack.build("--json", env=ONLINE)
    assert built.returncode == 2, built.stderr
    assert "a url source" in built.stderr and "Traceback" not in built.stderr


def _add_sizes(served: Served) -> None:
    text = served.lockfile.read_text(encoding="utf-8")

    def sized(match: re.Match[str]) -> str:
        rel = match.group(1).removeprefix(served.base + "/")
        size = (served.stack.root / rel).stat().st_size
        return f'{match.group(0)}, size = {size}'

    new = re.sub(r'url = "([^"]+\.whl)", hash = "sha256:[0-9a-f]+"(?!, size)', sized, text)
    assert new != text
    served.lockfile.write_text(new, encoding="utf-8")


@pytest.mark.parametrize(("mode", "said"), [("flood", "announces 1073741824 bytes"),
                                            ("flood-unannounced", "runs past"),
                                            ("drip", "deadline")])
def test_file_server_flooding_or_dripping_is_cut_off(served: Served, mode: str, said: str) -> None:
    _add_sizes(served)  # as PyPI's locks have them (these loopback pages give none)
    served.server.mode = mode
    served.server.only_suffix = ".whl"  # the index pages stay honest
    served.server.drip_s = 0.5
    code, err, house = served.wheelhouse("--request-timeout", "2", "--workers", "2")
    assert code == 3, err
    assert said in err and ".whl" in err, err
    assert not list(house.glob("*.part"))


def test_planted_part_symlink_is_replaced_not_written_through(served: Served) -> None:
    house = served.stack.root / "house"
    house.mkdir()
    victim = served.stack.root / "victim.txt"
    victim.write_text("keep me\n")
    (house / f"{NUMPY}.part").symlink_to(victim)
    code, err, _ = served.wheelhouse()
    assert code == 0, err
    assert victim.read_text() == "keep me\n"
    assert (house / NUMPY).is_file() and not (house / NUMPY).is_symlink()


@pytest.mark.parametrize("flag", [("--workers", "0"), ("--deadline", "nan"),
                                  ("--request-timeout", "-1")])
def test_bounds_that_bound_nothing_are_refused(served: Served, flag: tuple[str, str]) -> None:
    code, err, house = served.wheelhouse(*flag)
    assert code == 2, err
    assert flag[0] in err, err
    assert not house.exists()


# Each lock edit of section 1, as the pre-install verdict meets it: `validators static STACK
# --lock` runs the origin check (validators/lockcheck/origin.py) before it reads a byte of any
# wheel. Called in-process for each attack (a CLI start costs ~10 s here), through the CLI once.
STATIC_ATTACKS = ["another-host", "off-the-page", "other-sha256", "moved-registry",
                  "pinned-from-open-index", "direct-url"]


def _origin(served: Served, offline: bool = False) -> OriginChecked:
    manifest = load_stack(served.stack.manifest).manifest
    return check_lock_origin(served.lockfile, manifest, Limits(total_s=60), offline=offline)


def test_pre_install_verdict_refuses_a_lock_from_elsewhere_before_any_fetch(
    served: Served, tmp_path: Path
) -> None:
    """Each attack on the same locked stack (the lock is put back between them)."""
    evil = _evil_numpy(tmp_path / "attacker", tmp_path / "PLANTED")
    make_index(tmp_path / "attacker", [evil])
    honest = served.lockfile.read_text(encoding="utf-8")
    (served.stack.root / "elsewhere").mkdir()
    with hostile_server(tmp_path / "attacker") as attacker:
        for attack in STATIC_ATTACKS:
            served.lockfile.write_text(honest, encoding="utf-8")
            block = _block(served, "numpy")
            if attack == "another-host":
                _point_numpy_at(served, f"{attacker.base}{evil.name}", evil)
            elif attack == "off-the-page":
                _point_numpy_at(served, f"{served.base}/elsewhere/{evil.name}", evil)
            elif attack == "other-sha256":
                line = next(ln for ln in block.splitlines() if served.numpy_url() in ln)
                served.edit(line, re.sub(r"sha256:[0-9a-f]+", "sha256:" + "0" * 64, line))
            elif attack == "moved-registry":
                served.edit(block, block.replace(f"{served.base}/idx-pypi/simple",
                                                 f"{attacker.base}simple"))
            elif attack == "pinned-from-open-index":
                torch = _block(served, "torch")
                served.edit(torch, torch.replace("/idx-cuda/simple", "/idx-pypi/simple"))
            else:
                source = re.search(r"source = \{[^}]*\}", block)
                assert source is not None
                served.edit(block, block.replace(
                    source.group(0), f'source = {{ url = "{attacker.base}{evil.name}" }}'))
            with pytest.raises(BadInput, match="do not come from the index the manifest names"):
                _origin(served)
        # The command: exit 2 before any wheel is fetched, from either server.
        served.lockfile.write_text(honest, encoding="utf-8")
        _point_numpy_at(served, f"{attacker.base}{evil.name}", evil)
        before = len(served.server.requests)  # `builder lock` fetched wheels: not ours
        code, out = served.static()
        assert code == 2 and "is not a file index" in out and "numpy" in out, out
        assert not [p for p in attacker.requests if p.endswith(".whl")]
        assert not [p for p in served.server.requests[before:] if p.endswith(".whl")]


def test_pre_install_verdict_checks_origin_offline_and_says_when_it_cannot(
    served: Served,
) -> None:
    """The honest lock passes static.lock.origin; offline, the registry check still refuses a
    moved registry (no network needed for it); without a stack the verdict says it did not
    check origins (SKIP), never silently."""
    manifest = load_stack(served.stack.manifest).manifest
    assert origin_result(_origin(served), manifest, offline=False).status == "PASS"
    block = _block(served, "numpy")
    served.edit(block, block.replace(f"{served.base}/idx-pypi/simple", "http://127.0.0.1:9/simple"))
    with pytest.raises(BadInput, match="do not come from the index") as refused:
        _origin(served, offline=True)
    assert "numpy 2.0.0: locked from index http://127.0.0.1:9/simple" in refused.value.details[0]
    bare = check_lock_origin(served.lockfile, None, Limits(), offline=True)
    skipped = origin_result(bare, None, offline=True)
    assert skipped.status == "SKIP" and "no stack given" in skipped.reason


def _host_port(base: str) -> str:
    return base.split("://", 1)[1].rstrip("/")


# numpy's wheel URL (or its registry) rewritten; (what to write, refused?). `{b}` is the index
# server's base URL, `{hp}` its host:port, `{a}` the attacker's host:port, `{w}` numpy's wheel
# path on the index. uv reads URLs as WHATWG does, Python's urlsplit does not: every form the
# two could read as two places is refused; one that is the same place either way is accepted.
URL_TRICKS: dict[str, tuple[str, str, bool]] = {
    "backslash before user info (uv: the attacker's host)": ("wheel", "http://{a}\\@{hp}{w}", True),
    "backslash in the registry": ("registry", "http://{a}\\@{hp}/idx-pypi/simple", True),
    "user info naming the index host": ("wheel", "http://{hp}@{a}{w}", True),
    "harmless-looking user info": ("wheel", "http://pypi@{hp}{w}", True),
    "percent-encoded host": ("wheel", "http://127.0.0.%31:{port}{w}", True),
    "tab inside the host": ("wheel", "http://127.0.0.1\t:{port}{w}", True),
    "space in the path": ("wheel", "{b}/idx-pypi/simple/numpy /" + NUMPY, True),
    "encoded dot-dot segment": ("wheel", "{b}/idx-pypi/simple/numpy/%2e%2e/numpy/" + NUMPY, True),
    "double-encoded slash": ("wheel", "{b}/idx-pypi/simple/numpy%252F" + NUMPY, True),
    "query appended": ("wheel", "{b}{w}?x=1", True),
    "scheme upper-case": ("wheel", "HTTP://{hp}{w}", False),
    "fragment appended": ("wheel", "{b}{w}#egg=numpy", False),
    "registry with a trailing slash": ("registry", "{b}/idx-pypi/simple/", False),
}


def test_url_tricks_are_refused_or_read_as_the_same_place(
    served: Served, tmp_path: Path
) -> None:
    """Each rewrite of numpy's locked URLs, checked in-process (one lock run for all)."""
    honest = served.lockfile.read_text(encoding="utf-8")
    evil = _evil_numpy(tmp_path / "attacker", tmp_path / "PLANTED")
    make_index(tmp_path / "attacker", [evil])
    port = served.base.rsplit(":", 1)[1]
    wheel_path = served.numpy_url().removeprefix(served.base)
    with hostile_server(tmp_path / "attacker") as attacker:
        fill = {"b": served.base, "hp": _host_port(served.base), "a": _host_port(attacker.base),
                "w": wheel_path, "port": port}
        wrong = []
        for name, (what, template, refused) in URL_TRICKS.items():
            served.lockfile.write_text(honest, encoding="utf-8")
            new = template.format(**fill)
            if what == "wheel":
                served.edit(f'"{served.numpy_url()}"', json.dumps(new))
            else:
                block = _block(served, "numpy")
                served.edit(block, block.replace(f'"{served.base}/idx-pypi/simple"',
                                                 json.dumps(new)))
            try:
                _origin(served)
                outcome = False
            except BadInput:
                outcome = True
            if outcome != refused:
                wrong.append(f"{name}: {new!r} {'refused' if outcome else 'accepted'}")
        assert not wrong, wrong
        assert not attacker.requests


def test_a_redirect_to_other_bytes_is_a_hash_mismatch_and_keeps_nothing(
    served: Served, tmp_path: Path
) -> None:
    """The index answers numpy's wheel with a 301, 302 or 307 to another host serving a
    planted wheel of the same name: the bytes are checked against the lock's sha256 whatever
    the redirect (exit 3 naming both digests), and neither the file nor its .part is kept.
    (One locked stack for the three codes.)"""
    evil_dir = tmp_path / "attacker" / "idx-pypi" / "simple" / "numpy"
    evil = _evil_numpy(tmp_path / "w", tmp_path / "PLANTED")
    evil_dir.mkdir(parents=True)
    (evil_dir / NUMPY).write_bytes(evil.read_bytes())
    with hostile_server(tmp_path / "attacker") as attacker:
        served.server.mode = "redirect"
        served.server.only_suffix = NUMPY  # the pages and the other wheels stay honest
        served.server.redirect_to = attacker.base
        for code in (301, 302, 307):
            served.server.redirect_code = code
            asked = len(attacker.requests)
            rc, err, house = served.wheelhouse("--workers", "1")
            assert any(p.endswith(NUMPY) for p in attacker.requests[asked:]), code
            assert rc == 3, (code, err)
            assert "hash mismatch" in err and "the lock pins" in err, (code, err)
            assert not (house / NUMPY).exists() and not list(house.glob("*.part"))
