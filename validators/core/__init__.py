"""The run core: a validation run's context, options, check ids, results and their typed host
block, the pipeline of groups, and runs as child processes. It imports no group and no job
package (gate, records, fleet...): they import it (tests/foundation/test_import_plan.py)."""
