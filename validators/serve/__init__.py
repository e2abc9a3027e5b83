"""serve-bench: launch a serving profile, judge readiness, output and speed, tear down cleanly."""
