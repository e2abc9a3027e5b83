"""The user's record journeys, driven through the `stackgate` CLI as the README types it, on the
committed stacks, records and run reports (the parts that need no GPU).

- reproduce: every record this repository has ever committed lays out what it was made from
  (manifest and lock by sha256 from the tree or git history, older manifest forms migrated)
  and asks for this host's base site in the record's terms; the committed records rebuild here
  with `--no-validate` to "env tree identical" over a stand-in base site (tests/helpers/
  base_sites.py: it stands for the lent machine's image site-packages, which exists only
  there), from the checkout and from a copy without git history;
- gate: committed run reports against the committed record say "versions unknown" once and
  compare what is known (the verdicts themselves: tests/foundation/test_readme_commands.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from stackgate.manifest.loading import load_stack
from tests.helpers.base_sites import record_base_site, synthetic_base_site
from validators.gate.record_sources import check_base_site, materialize_sources
from validators.records.model import load_record

ROOT = Path(__file__).resolve().parents[2]
SGLANG = "records/h200-sglang/20261202T011853-034d1e7a9e43.json"
TRANSFORMERS = "records/h200-transformers/20261130T221413-ea68e04fe20d.json"
# Machine 2's gate-mrr15 run reports (copied from benchmarks/h200_sglang/results/machine2).
MRR15 = "tests/data/h200_sglang/gate-mrr15"
STACKGATE = str(Path(sys.executable).parent / "stackgate")  # the script `uv run stackgate` runs


def _stackgate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STACKGATE, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=1800,
    )


def _record(path: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((ROOT / path).read_text())
    return data


def _base_site(tmp_path: Path, record: str, **change: str) -> Path:
    return record_base_site(ROOT / record, tmp_path / "base", **change)


def _committed_records() -> dict[str, dict[str, object]]:
    """blob -> record JSON of every records/**/*.json any commit of any branch ever held."""
    git = ["git", "-C", str(ROOT)]
    commits = subprocess.run(
        [*git, "log", "--all", "--format=%H", "--", "records/"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    found: dict[str, dict[str, object]] = {}
    for commit in commits:
        listing = subprocess.run(
            [*git, "ls-tree", "-r", commit, "records/"], capture_output=True, text=True, check=True
        ).stdout
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            blob = meta.split()[2]
            if path.endswith(".json") and blob not in found:
                shown = subprocess.run(
                    [*git, "cat-file", "blob", blob], capture_output=True, text=True, check=True
                )
                found[blob] = json.loads(shown.stdout)
    return found


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the repository's git history")
def test_every_committed_record_lays_out_what_it_was_made_from(tmp_path: Path) -> None:
    records = _committed_records()
    assert len(records) >= 2
    for n, data in enumerate(records.values()):
        record = load_record(data, where=f"committed record {n}")
        sources = materialize_sources(record, tmp_path / str(n))
        load_stack(sources.stacks / f"{record.stack}.toml")  # older forms through the migration
        with pytest.raises(BadInput) as refused:
            check_base_site(record, None)
        message = refused.value.message
        assert message.startswith(f"record {record.label} was built over a base site"), message
        assert "--base-site PATH" in message and "stackgate-reproduce" not in message
        raw = record.build.raw["base_site"]
        site = synthetic_base_site(tmp_path / f"base{n}", raw["packages"])
        assert "versions only" in check_base_site(record, site)[0]


def test_a_base_site_of_other_versions_is_refused_before_anything_is_built(
    tmp_path: Path,
) -> None:
    site = _base_site(tmp_path, SGLANG, torch="2.10.0")
    root = tmp_path / "envs"
    done = _stackgate(
        "reproduce", SGLANG, "--no-validate", "--base-site", str(site), "--venv-root", str(root)
    )
    assert done.returncode == 2, done.stderr
    assert "not the base site record h200-sglang@034d1e7a9e43 was built over" in done.stderr
    assert "torch: recorded 2.11.0, here 2.10.0" in done.stderr
    assert not root.exists()


def test_a_record_over_a_base_site_asks_for_this_hosts(tmp_path: Path) -> None:
    done = _stackgate("reproduce", SGLANG, "--no-validate", "--venv-root", str(tmp_path / "e"))
    assert done.returncode == 2
    assert "record h200-sglang@034d1e7a9e43 was built over a base site (197 distributions, " \
        "torch 2.11.0; at /opt/torch/.venv/lib/python3.12/site-packages on the machine that " \
        "made it" in done.stderr  # fmt: skip
    assert "no such folder" not in done.stderr


def _reproduced(done: subprocess.CompletedProcess[str], record: str) -> dict[str, object]:
    # a host without the record's GPUs (CI's, this one's): the host differs, nothing else
    assert done.returncode == 1, done.stderr[-3000:]
    outcome: dict[str, object] = json.loads(done.stdout)
    label = outcome["record"]
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"DIFFERS {label} in {outcome['env']}: "), last
    assert "(host gpu." in last, last
    # the rebuilt env holds build-time byte-code, and its tree still equals the record's
    built = json.loads((Path(str(outcome["env"])) / "stackgate" / "build-record.json").read_text())
    assert built["bytecode"]["mode"] == "checked-hash", built.get("bytecode")
    assert built["bytecode"]["pyc_files"] > 0 and built["bytecode"]["failed"] == 0
    tree = outcome["env_tree"]
    assert tree == {
        "recorded": _record(record)["build"]["env_tree_sha256"],  # type: ignore[index]
        "built": _record(record)["build"]["env_tree_sha256"],  # type: ignore[index]
    }, outcome["reasons"]
    parts = outcome["parts"]
    assert parts["env"].startswith("env tree identical"), parts  # type: ignore[index]
    assert parts["checks"] == "not run (--no-validate)"  # type: ignore[index]
    assert any("base site path recorded /opt/torch" in i for i in outcome["host_inputs"])  # type: ignore[attr-defined]
    assert "env: env tree identical" in done.stderr
    return outcome


def _reproduce(tmp_path: Path, record: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """`stackgate reproduce RECORD --no-validate --json` over a base site built for it."""
    site = _base_site(tmp_path, record)
    done = _stackgate(
        "reproduce", record, "--no-validate", "--json",
        "--base-site", str(site), "--venv-root", str(tmp_path / "envs"),
        env=env,
    )  # fmt: skip
    return _reproduced(done, record)


@pytest.mark.network
def test_the_transformers_record_rebuilds_to_its_env_tree(tmp_path: Path) -> None:
    """Its manifest (schema 1, with the never-read timeouts) comes from git history."""
    outcome = _reproduce(tmp_path, TRANSFORMERS)
    assert any("validation.timeouts.model_load_s" in n for n in outcome["notes"])  # type: ignore[attr-defined]


@pytest.mark.network
def test_a_copy_without_git_history_rebuilds_from_the_records_own_manifest(
    tmp_path: Path,
) -> None:
    """A `git archive` export has no history: the manifest comes from the record's tables."""
    stacks = tmp_path / "export" / "stacks"
    shutil.copytree(ROOT / "stacks", stacks)
    outcome = _reproduce(tmp_path, TRANSFORMERS, env={"STACKGATE_STACKS_DIR": str(stacks)})
    assert "manifest from the record's copy of its tables" in outcome["notes"]  # type: ignore[operator]


@pytest.mark.network
def test_the_transformers_record_rebuilds_offline_from_a_wheelhouse_alone(tmp_path: Path) -> None:
    """The air-gapped host's path: a wheelhouse made on a connected host, then `reproduce ID`
    with an empty record store (the committed file is found by its id), offline, with an
    empty uv cache: every file of the env comes from the wheelhouse."""
    wheels = tmp_path / "wheels"
    made = _stackgate("wheelhouse", "h200-transformers", "--to", str(wheels))
    assert made.returncode == 0, made.stderr[-2000:]
    assert made.stderr.splitlines()[-1].startswith(f"OK wheelhouse {wheels}: "), made.stderr
    record_id = str(_record(TRANSFORMERS)["record_id"])[:12]
    site = _base_site(tmp_path, TRANSFORMERS)
    done = _stackgate(
        "reproduce", record_id, "--no-validate", "--json", "--wheelhouse", str(wheels),
        "--base-site", str(site), "--venv-root", str(tmp_path / "envs"),
        env={"UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache"),
             "STACKGATE_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    _reproduced(done, TRANSFORMERS)
    assert not (tmp_path / "state" / "stackgate.sqlite").exists()  # read-only: nothing written


@pytest.mark.network
@pytest.mark.slow
def test_the_sglang_record_rebuilds_to_its_env_tree(tmp_path: Path) -> None:
    """~600 MB of wheels from PyPI (its torch comes from the base site, not the lock)."""
    outcome = _reproduce(tmp_path, SGLANG)
    assert any("header (stackgate's profile-module format) recorded 1" in i
               for i in outcome["host_inputs"])  # type: ignore[attr-defined]  # fmt: skip


def test_a_gate_of_run_reports_says_versions_unknown_once(tmp_path: Path) -> None:
    html = tmp_path / "gate.html"
    done = _stackgate(
        "gate", f"{MRR15}/run-01.json",
        "--run", f"{MRR15}/run-02.json",
        "--baseline", SGLANG, "--html", str(html),
    )  # fmt: skip
    assert done.returncode == 1
    unknown = "versions unknown (the run report holds only the env's tree hash)"
    assert done.stderr.count(unknown) == 1
    assert " removed " not in done.stderr
    # 2 runs against the record's 3: ten run-label permutations, so no family p below 1/10 and
    # no refusal at the 1% goal; the 18% throughput drop and x4.5 p99 TTFT are INCONCLUSIVE
    # (tests/gate/test_gate_regressions.py: REFUSED at the runs that decide them)
    assert done.stderr.strip().splitlines()[-1].startswith("INCONCLUSIVE")
    body = html.read_text().split("<body>", 1)[1].lstrip()
    assert body.startswith('<div class="banner fail">INCONCLUSIVE</div>')
    assert unescape(body).count(unknown) == 1 and ">removed<" not in body
