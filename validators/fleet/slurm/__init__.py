"""Slurm: job arrays (one element per node) and an `afterany` collector, from fleet/slurm/."""
