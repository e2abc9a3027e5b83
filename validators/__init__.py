"""validators: judge an environment (host, static, runtime, serve-bench, records, gate)."""
