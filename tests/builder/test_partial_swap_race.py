"""A real racer swaps `<env>.partial` for a symlink to a victim folder, in a loop, while real
builds run (uv installing real wheels): the builder works through the folder it opened, so no
file lands in the victim, and a build whose folder was swapped publishes nothing (exit 3) and
never says "built" with the env somewhere else."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.builder.conftest import LocalStack

BUILDS = 6


class PartialSwapper(threading.Thread):
    """Renames every `*.partial` folder under `stack_dir` away and puts a symlink to `victim`
    at its name, as fast as it can, until stopped."""

    def __init__(self, stack_dir: Path, victim: Path) -> None:
        super().__init__(daemon=True)
        self.stack_dir, self.victim = stack_dir, victim
        self.stop = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                names = os.listdir(self.stack_dir)
            except OSError:
                continue
            for name in names:
                entry = self.stack_dir / name
                if name.endswith(".partial") and not entry.is_symlink() and entry.is_dir():
                    n += 1
                    try:
                        entry.rename(self.stack_dir / f"stolen-{n}")
                        entry.symlink_to(self.victim, target_is_directory=True)
                        self.swaps += 1
                    except OSError:
                        pass


def test_a_partial_swapped_for_a_symlink_never_redirects_the_build(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    assert local_stack.lock().returncode == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    outcomes = []
    for i in range(BUILDS):
        venvs = tmp_path / f"envs-{i}"
        stack_dir = venvs / local_stack.manifest.stem
        stack_dir.mkdir(parents=True)
        racer = PartialSwapper(stack_dir, victim)
        racer.start()
        try:
            done = local_stack.cli(*local_stack.build_args(venvs=venvs))
        finally:
            racer.stop.set()
            racer.join()
        outcomes.append((done.returncode, racer.swaps))
        assert os.listdir(victim) == [], f"build {i} wrote into the victim: {os.listdir(victim)}"
        assert "Traceback" not in done.stderr, done.stderr
        if racer.swaps:
            assert done.returncode == 3, (done.stdout, done.stderr)
            # refused as a swap wherever it was seen: at the publish or when the partial was opened
            assert "[swapped]" in done.stderr, done.stderr
        current = stack_dir / "current"
        if done.returncode == 0:
            env = current.resolve()
            assert env.parent == stack_dir.resolve() and not (stack_dir / env.name).is_symlink()
        else:
            assert not current.exists()
    assert sum(1 for _rc, swaps in outcomes if swaps) >= BUILDS // 2, outcomes
