"""The run core: a validation run's context, options, check ids, results, the pipeline of groups,
runs as child processes, and re-checking or rebuilding an env before a verdict leans on it."""
