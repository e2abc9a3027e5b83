"""The content hash of an environment's files (the build record's `tree`).

The record model itself is stackgate.build_record (builder writes it, validators read it); the
hash, what it covers and what it leaves out, is stackgate.envtree's (validators re-check it).
"""

from __future__ import annotations

from pathlib import Path

from stackgate.build_record import TreeHash
from stackgate.digests import DigestCache
from stackgate.envtree import compute_tree


def tree_hash(
    root: Path, *, own_paths: tuple[Path, ...] = (), cache: DigestCache | None = None
) -> TreeHash:
    """The tree hash of an env (stackgate.envtree.compute_tree, current scheme)."""
    tree = compute_tree(root, own_paths=own_paths, cache=cache)
    return TreeHash(sha256=tree.sha256, files=tree.files, bytes=tree.bytes, scheme=tree.scheme)
