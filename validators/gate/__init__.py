"""The gate: compare a candidate with a known-good record, honestly about noise.

- `runs`: one value per validation run (repeats within a run averaged);
- `family`: the family-wise max-T test over the gated metrics, power at the measured noise;
- `stats`: ratio orientation, CV, and the percentile bootstrap the HTML charts draw;
- `policy`: margins, family confidence, target, repeats (benchmarks/gate/gate_family_sim.py);
- `compare`: checks, metrics, versions, env, host -> `GateResult`;
- `render`: the rich tables that say exactly why.
"""
