"""A SKIP the stack's manifest accepts (validation.accepted_findings) no longer stops mark-good,
and one it does not accept still does. Found when serve-bench.token_counts (issue 23) SKIPped for
the synthetic token server, which serves no model and so has no tokenizer: every fleet test's
mark-good was refused. A real engine's model has a tokenizer; a stack that cannot re-count must
say so in its manifest, with its reason, and the record keeps it."""

from __future__ import annotations

from pathlib import Path

from stackgate.manifest.loading import load_stack
from validators.core.pipeline import apply_accepted
from validators.core.results import Result
from validators.records.compose import _acceptable_skip

ROOT = Path(__file__).resolve().parents[2]
WHY = "the synthetic token server serves no model"


def _results() -> list[Result]:
    return [
        Result(
            check="serve-bench.token_counts",
            group="serve-bench",
            status="SKIP",
            reason="not re-counted: no tokenizer for 'synthetic'",
        ),
        Result(check="static.abi.x", group="static", status="FAIL", reason="missing symbol"),
        Result(check="serve-bench.launch", group="serve-bench", status="PASS", reason="up"),
        Result(
            check="serve-bench.correctness.greedy",
            group="serve-bench",
            status="SKIP",
            reason="no reference",
        ),
    ]


def _manifest(tmp_path: Path, accepted: dict[str, str]) -> Path:
    text = (ROOT / "stacks" / "h200-sglang.toml").read_text(encoding="utf-8")
    section = "[validation.accepted_findings]\n"
    assert section in text
    lines = "".join(f'"{check}" = "{why}"\n' for check, why in accepted.items())
    path = tmp_path / "h200-sglang.toml"
    path.write_text(text.replace(section, section + lines), encoding="utf-8")
    return path


def test_an_accepted_skip_keeps_its_finding_and_gains_the_acceptance(tmp_path: Path) -> None:
    accepted = {"serve-bench.token_counts": WHY, "static.abi.x": "known"}
    out = {r.check: r for r in apply_accepted(_results(), accepted)}
    skip = out["serve-bench.token_counts"]
    assert skip.status == "SKIP" and skip.evidence["accepted"] == WHY
    assert WHY in skip.reason and "no tokenizer for 'synthetic'" in skip.reason
    assert out["static.abi.x"].status == "SKIP"  # FAILs as before
    assert (
        out["serve-bench.launch"].status == "PASS"
        and "accepted" not in out["serve-bench.launch"].evidence
    )
    assert "accepted" not in out["serve-bench.correctness.greedy"].evidence

    manifest = load_stack(str(_manifest(tmp_path, accepted))).manifest
    assert _acceptable_skip(skip, manifest)
    assert not _acceptable_skip(out["serve-bench.correctness.greedy"], manifest)


def test_a_skip_the_manifest_does_not_accept_still_refuses(tmp_path: Path) -> None:
    manifest = load_stack(str(_manifest(tmp_path, {}))).manifest
    plain = apply_accepted(_results(), {})[0]
    assert plain.status == "SKIP" and not _acceptable_skip(plain, manifest)
    # An acceptance copied into the evidence by hand, not made by the manifest, is not one.
    forged = plain.model_copy(update={"evidence": {"accepted": WHY}})
    assert not _acceptable_skip(forged, manifest)
