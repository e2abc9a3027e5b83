"""The gate: compare a candidate with a known-good record, honestly about noise.

- `stats`: bootstrap interval of the candidate/baseline ratio of means;
- `policy`: tolerance, confidence, repeats (defaults from benchmarks/gate/gate_power.py);
- `compare`: checks, metrics, versions, env, host -> `GateResult`;
- `render`: the rich tables that say exactly why.
"""
