"""Manifest -> uv.lock: the generated uv project, `uv lock`, the lock's origins and pins, the
compatibility check of a new lock, and the wheelhouse of its artifacts."""
