"""Fleet validation: many nodes through Slurm or Kubernetes, one verdict per node."""
