"""The two batch scripts of a Slurm fleet, rendered from the templates in fleet/slurm/."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2

from validators.fleet.slurm.options import SlurmFleet

ARRAY_SCRIPT = "validate.sbatch"
COLLECT_SCRIPT = "collect.sbatch"


def templates_dir() -> Path:
    """fleet/slurm in the checkout this package runs from (data, like stacks/ and images/)."""
    return Path(__file__).resolve().parents[3] / "fleet" / "slurm"


def render(spec: SlurmFleet) -> dict[str, str]:
    """The two batch scripts, by file name."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # shell scripts, quoted by the `q` filter where a value is a word
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return {
        name: env.get_template(f"{name}.j2").render(spec=spec)
        for name in (ARRAY_SCRIPT, COLLECT_SCRIPT)
    }
