"""Digests read while uv still installs (stackgate.envtree.early_digests) are used only for files provably
unchanged since the read: the tree hash and the RECORD check come out the same as reading every
file after the install, and a file changed after its early read (same size, mtime put back) is
read again. Real uv installs into real venvs; the build's own use is covered by every build test
(tests/builder/test_build_clashes.py, test_record_class.py, test_wheel_record.py)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from stackgate.envtree import compute_tree, digest_patterns, file_digests, own_paths_of
from stackgate.envtree.early_digests import MARGIN_NS, Early, EarlyHasher, valid_raw
from stackgate.envtree.wheel_records import ParsedRecord, judge, read_claims
from tests.helpers.uv_venv import install, site, venv
from tests.helpers.wheels import make_wheel


def _env(tmp_path: Path) -> Path:
    cache = tmp_path / "uv-cache"
    env = venv(tmp_path, cache)
    wheels = [
        make_wheel(tmp_path / "w", f"pkg{i}", "1.0",
                   files={f"pkg{i}/__init__.py": f"X = {i}\n", f"pkg{i}/big.bin": os.urandom(3 << 20)})
        for i in range(4)
    ]
    install(env, cache, *wheels)
    return env.resolve()


def _early(env: Path) -> dict[str, Early]:
    with EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests) as hasher:
        return dict(hasher.finish())


def test_early_digests_give_the_same_tree_and_records(tmp_path: Path) -> None:
    env = _env(tmp_path)
    time.sleep(2 * MARGIN_NS / 1e9)  # every file written well before it is read
    early = _early(env)
    assert f"lib/{site(env).parent.name}/site-packages/pkg0/big.bin" in early

    plain = compute_tree(env, own_paths=own_paths_of(env))
    used = compute_tree(env, own_paths=own_paths_of(env), early=early)

    assert used.sha256 == plain.sha256 and used.entries == plain.entries
    raw = {**valid_raw(env, early, used.raw), **used.raw}
    assert judge(read_claims(env), raw).damaged == []


def test_a_file_changed_after_its_early_read_is_read_again(tmp_path: Path) -> None:
    env = _env(tmp_path)
    time.sleep(2 * MARGIN_NS / 1e9)
    early = _early(env)
    target = site(env) / "pkg1" / "big.bin"
    st = target.stat()
    data = bytearray(target.read_bytes())
    data[0] ^= 0xFF
    target.write_bytes(bytes(data))  # same size ...
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime put back

    tree = compute_tree(env, own_paths=own_paths_of(env), early=early)

    rel = str(target.relative_to(env))
    assert tree.raw[rel] != early[rel].raw
    assert tree.sha256 == compute_tree(env, own_paths=own_paths_of(env)).sha256
    (found,) = judge(read_claims(env), {**valid_raw(env, early, tree.raw), **tree.raw}).damaged
    assert found.path == rel and found.kind == "differs"


def test_a_file_written_within_the_margin_of_its_read_is_not_trusted(tmp_path: Path) -> None:
    env = _env(tmp_path)
    time.sleep(2 * MARGIN_NS / 1e9)
    early = _early(env)
    rel = f"lib/{site(env).parent.name}/site-packages/pkg2/__init__.py"
    entry = early[rel]
    st = os.lstat(env / rel)
    assert entry.valid_for(st)
    # the same file, read as if the read had started right after its last write
    racy = replace(entry, started_ns=max(st.st_mtime_ns, st.st_ctime_ns) + MARGIN_NS // 2)
    assert not racy.valid_for(st)
    forged = replace(racy, tree=b"\0" * 32, raw=b"\0" * 32)
    tree = compute_tree(env, own_paths=own_paths_of(env), early={rel: forged})
    assert tree.raw[rel] != b"\0" * 32  # not used: the file was read again


def _wait_for(hasher: EarlyHasher, rel: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if rel in hasher.results:
            return True
        time.sleep(0.05)
    return False


def test_files_a_record_lists_before_they_are_there_are_read_once_they_come(
    tmp_path: Path,
) -> None:
    """uv can write a wheel's RECORD before its files: the files are tried again while the
    install goes on (not left to the tree hash), and their digests are the ones it would take."""
    env = _env(tmp_path)
    pkg = site(env) / "pkg3"
    aside = tmp_path / "aside"
    pkg.rename(aside)  # RECORD and INSTALLER there, the files not (yet)
    time.sleep(2 * MARGIN_NS / 1e9)
    rel = f"lib/{site(env).parent.name}/site-packages/pkg3/big.bin"
    with EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests) as hasher:
        assert _wait_for(hasher, f"lib/{site(env).parent.name}/site-packages/pkg0/big.bin")
        assert rel not in hasher.results
        aside.rename(pkg)  # the files come
        assert _wait_for(hasher, rel), "read only after the install (or never)"
        early = dict(hasher.finish())
    tree = compute_tree(env, own_paths=own_paths_of(env), early=early)
    assert early[rel].valid_for(os.lstat(env / rel))
    assert tree.sha256 == compute_tree(env, own_paths=own_paths_of(env)).sha256


def test_a_record_that_changes_is_read_again(tmp_path: Path) -> None:
    """A RECORD read while it lists only part of its wheel: the rows it gains are read while the
    install goes on, not left to the tree hash."""
    env = _env(tmp_path)
    record = next(site(env).glob("pkg1-*.dist-info")) / "RECORD"
    full = record.read_text()
    record.write_text("".join(ln for ln in full.splitlines(True) if "big.bin" not in ln))
    time.sleep(2 * MARGIN_NS / 1e9)
    rel = f"lib/{site(env).parent.name}/site-packages/pkg1/big.bin"
    with EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests) as hasher:
        assert _wait_for(hasher, f"lib/{site(env).parent.name}/site-packages/pkg0/big.bin")
        time.sleep(0.6)
        assert rel not in hasher.results
        record.write_text(full)  # uv writes the whole RECORD
        assert _wait_for(hasher, rel), "read only after the install (or never)"
        early = dict(hasher.finish())
    assert early[rel].valid_for(os.lstat(env / rel))


def _parsed(env: Path) -> dict[str, ParsedRecord]:
    with EarlyHasher(env, digest_patterns(env, own_paths_of(env)), file_digests) as hasher:
        hasher.finish()
        return hasher.parsed_records()


def test_the_records_read_during_the_install_serve_the_record_check(tmp_path: Path) -> None:
    env = _env(tmp_path)
    time.sleep(2 * MARGIN_NS / 1e9)
    parsed = _parsed(env)
    assert len(parsed) == 4  # pkg0..pkg3

    before = read_claims(env)
    assert read_claims(env, parsed) == before
    assert judge(before).damaged == []
    # a RECORD rewritten since (a row whose hash now names other bytes) is parsed again
    record = site(env) / "pkg3-1.0.dist-info" / "RECORD"
    text = record.read_text()
    record.write_text(text.replace("pkg3/__init__.py,sha256=", "pkg3/__init__.py,sha256=AAAA"))
    again = read_claims(env, parsed)
    assert again == read_claims(env) and again != before
    (found,) = judge(again).damaged
    assert found.path.endswith("pkg3/__init__.py") and found.kind == "differs"


def test_a_record_written_within_the_margin_of_its_read_is_read_again(tmp_path: Path) -> None:
    env = _env(tmp_path)
    time.sleep(2 * MARGIN_NS / 1e9)
    parsed = _parsed(env)
    (key, entry), *_ = sorted(parsed.items())
    fake = replace(entry, inside=(), read_ns=max(entry.ident[2], entry.ident[3]) + 1)
    assert not fake.valid_for(os.stat(key))
    assert read_claims(env, {key: fake}) == read_claims(env)  # the rows are not taken from it
