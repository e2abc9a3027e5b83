"""builder: turn a stack manifest into an environment (check, lock, venv, image)."""
