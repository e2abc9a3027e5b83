"""`builder lock` answers some locks in its own process (stackgate.lock.torch_abi.lookup_lock) and asks
`validators compat --lock` (validators.torch_abi.lock_verdict.check_lock) for the rest. Where the
builder answers, its verdict is the one the validators give for the same bytes: each variant of
a lock that needs no judging (no torch, torch not over HTTP, a wheel without a size, no one
Python, not TOML) is answered by both, on an empty cache, without a byte of the network."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackgate.lock.torch_abi import lookup_lock
from validators.elf.facts_cache import FactsCache
from validators.torch_abi.lock_verdict import check_lock

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "stacks" / "locks"
CU128 = (LOCKS / "cu128" / "uv.lock").read_text(encoding="utf-8")
TORCH_URL = "https://files.pythonhosted.org/packages/"


def _file_index_torch(text: str) -> str:
    """cu128 with torch's wheels served from a local folder (a file:// index)."""
    head, sep, rest = text.partition('name = "torch"\nversion = "2.9.1"\n')
    end = rest.index("\n[[package]]")
    block = rest[:end].replace(TORCH_URL, "file:///srv/wheels/")
    return head + sep + block + rest[end:]


def _sizeless_torch(text: str) -> str:
    head, sep, rest = text.partition('name = "torch"\nversion = "2.9.1"\n')
    end = rest.index("\n[[package]]")
    block = rest[:end]
    cut = block.index(", size = ")
    block = block[:cut] + block[block.index(",", cut + 2) :]
    return head + sep + block + rest[end:]


VARIANTS = {
    "h200-sglang": (LOCKS / "h200-sglang" / "uv.lock").read_text(encoding="utf-8"),
    "h200-transformers": (LOCKS / "h200-transformers" / "uv.lock").read_text(encoding="utf-8"),
    "torch-from-a-file-index": _file_index_torch(CU128),
    "a-wheel-without-size": _sizeless_torch(CU128),
    "python-not-pinned": CU128.replace(
        'requires-python = "==3.12.*"', 'requires-python = ">=3.10"'
    ),
    "not-toml": "version = [\n",
    "no-packages": 'version = 1\nrequires-python = "==3.12.*"\n',
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_builder_answers_as_the_validators_do(variant: str, tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text(VARIANTS[variant], encoding="utf-8")
    mine = lookup_lock(lock, tmp_path / "builder-cache")
    assert mine is not None, variant  # answered without asking the validators
    theirs = check_lock(lock, FactsCache(tmp_path / "validators-cache"), offline=True)
    assert mine.from_cache
    assert mine.model_dump(exclude={"seconds", "from_cache"}) == theirs.model_dump(
        exclude={"seconds", "from_cache"}
    )
    assert theirs.pairs == [] and theirs.bytes_fetched == 0


def test_a_lock_with_torch_over_http_and_no_verdict_is_left_to_the_validators(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text(CU128, encoding="utf-8")
    assert lookup_lock(lock, tmp_path) is None
