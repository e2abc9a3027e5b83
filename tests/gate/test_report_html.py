"""The HTML report: self-contained (no script, no URL), escaped, and rendered by a real headless
Chromium with no console message. CI must install Debian's `chromium` (.ci/bootstrap does)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stackgate.manifest.loading import load_stack
from tests.helpers.synth_reports import make_report, measured_cv
from validators.core.results import Result
from validators.gate.compare import gate
from validators.records.compose import compose_record
from validators.records.model import BuildFacts, GpuInfo, HostFingerprint, Record
from validators.reporting.html import render_report, write_report

HOST = HostFingerprint(
    gpu=GpuInfo(model="NVIDIA RTX PRO 6000", count=8, compute_capabilities=["12.0"]),
    driver="590.48.01",
    interconnect="pcie",
)
_PNG = b"\x89PNG\r\n\x1a\n"


def _pair(slowdown: float = 0.05) -> tuple[Record, Record]:
    rng = np.random.default_rng(21)
    loaded = load_stack("cu128")
    cv = measured_cv()
    base = [make_report(rng, cv=cv, raw=True) for _ in range(8)]
    cand = [
        make_report(rng, cv=cv, raw=True, slowdown=slowdown, failing=("runtime.flashinfer_jit",))
        for _ in range(8)
    ]
    b = compose_record(loaded, base, build=BuildFacts(), host=HOST, kind="known-good")
    c = compose_record(loaded, cand, build=BuildFacts(), host=HOST, kind="candidate")
    return b, c


def test_report_is_self_contained_and_has_every_section() -> None:
    baseline, candidate = _pair()
    html = render_report(candidate, baseline=baseline, gate_result=gate(baseline, candidate))
    assert "<script" not in html.lower()
    assert not re.search(r"\b(src|href)\s*=", html)
    # The only URL is the SVG namespace, an identifier that is never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    assert 'class="banner fail">REFUSED' in html
    assert "runtime.flashinfer_jit" in html
    assert html.count("<svg") == 4  # throughput, ratio, TTFT and ITL distributions
    assert "output_throughput: mean and 95% interval over runs" in html
    assert "TTFT (ms) per request" in html and "ITL (ms) per request" in html


def test_text_from_records_is_escaped() -> None:
    baseline, candidate = _pair()
    evil = Result(
        check="static.abi.torchao",
        group="static",
        status="FAIL",
        reason="<script>alert(1)</script>",
    )
    candidate = candidate.model_copy(update={"checks": [*candidate.checks, evil]}).sealed()
    html = render_report(candidate, baseline=baseline, gate_result=gate(baseline, candidate))
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_record_alone_renders_without_a_baseline() -> None:
    _, candidate = _pair()
    html = render_report(candidate)
    assert html.count("<svg") == 3
    # A failed check is a verdict even without a gate; a lone record with none passed nothing
    # against anything: no green PASSED, it says what it is. A run is a run.
    failed = [c for c in candidate.checks if c.status in ("FAIL", "ERROR")]
    if failed:
        assert f'class="banner fail">FAILED: {len(failed)} check(s)</div>' in html
    else:
        assert 'class="banner info">' in html and "no baseline compared" in html
        assert 'class="banner pass"' not in html
    assert ("<th>run</th>" in html) == (candidate.kind == "candidate")
    assert ">candidate<" not in html.split("<svg", 1)[0]  # the record is not named candidate


@pytest.fixture
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium not installed (apt-get install -y chromium); CI installs it")


def _headless(chromium: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
        *extra,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_headless_chromium_renders_it_with_no_console_message(
    chromium: str, tmp_path: Path
) -> None:
    baseline, candidate = _pair()
    page = write_report(
        tmp_path / "report.html", candidate, baseline=baseline,
        gate_result=gate(baseline, candidate),
    )  # fmt: skip
    shot = tmp_path / "report.png"
    done = _headless(
        chromium, tmp_path / "p1", "--window-size=1280,3400", f"--screenshot={shot}",
        page.as_uri(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == _PNG and shot.stat().st_size > 50_000
    assert _console_lines(done.stderr) == []
    dom = _headless(chromium, tmp_path / "p2", "--dump-dom", page.as_uri())
    assert "REFUSED" in dom.stdout and dom.stdout.count("<svg") == 4
    assert _console_lines(dom.stderr) == []


def test_the_console_check_would_see_a_message(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "noisy.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("marker-7")</script>')
    done = _headless(chromium, tmp_path / "p", "--dump-dom", page.as_uri())
    assert any("marker-7" in line for line in _console_lines(done.stderr))


def test_without_raw_samples_the_run_quantiles_are_drawn() -> None:
    from tests.gate.test_extract import LEVELS, SINGLE

    levels = [{k: v for k, v in lv.items() if k not in ("ttfts_ms", "itls_ms")} for lv in LEVELS]
    report = make_report(np.random.default_rng(0), required=("host", "static", "runtime"))
    report.results.append(
        Result(check="serve-bench.sweep", group="serve-bench", status="PASS", reason="ok",
               evidence={"levels": levels})
    )  # fmt: skip
    report.results.append(
        Result(check="serve-bench.single_stream", group="serve-bench", status="PASS",
               reason="ok", evidence=SINGLE)
    )  # fmt: skip
    rec = compose_record(load_stack("cu128"), [report], build=BuildFacts(), host=HOST,
                         kind="known-good")  # fmt: skip
    html = render_report(rec)
    assert "TTFT (ms): median (dot) to p99 (bar end)" in html
    assert "ITL (ms): median (dot) to p99 (bar end)" in html
