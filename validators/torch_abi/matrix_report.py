"""The matrix as text (rows: package versions, columns: torch versions) and as one
self-contained HTML file with a heat map (inline CSS, no scripts, no external URL)."""

from __future__ import annotations

import jinja2

from stackgate.lock.torch_abi import PairVerdict
from validators.torch_abi.matrix import Matrix
from validators.torch_abi.proposals import Proposal, RuleCheck

MARK = {"loads": "ok", "breaks": "X", "undecidable": "?"}


def text_table(matrix: Matrix) -> list[str]:
    """Plain lines (no markup): one row per package version, one column per torch version."""
    width = max([len(v) for v in matrix.versions] + [len(matrix.package)])
    cols = matrix.torch_versions
    head = f"{matrix.package:<{width}}  " + "  ".join(f"{c:>6}" for c in cols)
    lines = [head]
    for v in matrix.versions:
        cells = []
        for t in matrix.torch_versions:
            p = matrix.pair(v, t)
            cells.append(f"{MARK[p.verdict] if p else '':>6}")
        lines.append(f"{v:<{width}}  " + "  ".join(cells))
    lines.append(
        "ok: loads   X: breaks (first missing symbol/library in --json and the HTML)   "
        "?: undecidable (reason given)"
    )
    return lines


def _why(p: PairVerdict) -> str:
    if p.verdict == "breaks":
        return f"{p.kind}: {p.first}"
    return p.reason


_TEMPLATE = jinja2.Template(
    """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>compat: {{ m.package }}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:center}
td.loads{background:#2e9b4f;color:#fff} td.breaks{background:#c9342f;color:#fff}
td.undecidable{background:#bbb} td.none{background:#fff}
th.v{text-align:left} pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}
.small{font-size:12px;color:#555}
</style></head><body>
<h1>{{ m.package }} beside torch</h1>
<p class="small">Python {{ m.python }}, glibc {{ m.glibc }}, index {{ m.index }}, torch from
{{ m.torch_index }}{% if m.targets %}, targets {{ m.targets|join(", ") }}{% endif %};
{{ m.pairs|length }} pairs in {{ m.seconds }} s, {{ "%.1f"|format(m.bytes_fetched/1e6) }} MB
read of {{ "%.1f"|format(m.wheel_bytes/1e6) }} MB of wheels; {{ m.verdicts_from_cache }}
verdicts from the cache. Hover a cell for the evidence.</p>
<table><tr><th class="v">{{ m.package }} \\ torch</th>
{% for t in m.torch_versions %}<th>{{ t }}</th>{% endfor %}</tr>
{% for v in m.versions %}<tr><th class="v">{{ v }}</th>
{% for t in m.torch_versions %}{% set p = m.pair(v, t) %}{% if p %}<td class="{{ p.verdict }}" title="{{ why(p) }}">{{ mark[p.verdict] }}</td>{% else %}<td class="none"></td>{% endif %}{% endfor %}
</tr>{% endfor %}</table>
<h2>Breaks and undecidable pairs</h2>
<table><tr><th>version</th><th>torch</th><th>verdict</th><th>evidence</th></tr>
{% for p in m.pairs if p.verdict != "loads" %}<tr><td>{{ p.version }}</td><td>{{ p.torch }}</td>
<td class="{{ p.verdict }}">{{ p.verdict }}</td><td style="text-align:left">{{ why(p) }}</td></tr>{% endfor %}
</table>
<h2>Hand-written rules against the matrix</h2>
{% if checks %}<ul>{% for c in checks %}<li><b>{{ c.rule }}</b>: {% if not c.comparable %}not compared ({{ c.note }}){% elif c.disagreements %}<b>disagrees</b>: forbids {{ c.disagreements|length }} pairs that load: {{ c.disagreements[:5]|join("; ") }}{% else %}agrees ({{ c.agreements }} pairs it forbids break){% endif %}</li>{% endfor %}</ul>
{% else %}<p>No rule names {{ m.package }}.</p>{% endif %}
<h2>Proposed rules (stacks/rules.toml syntax)</h2>
{% if proposals %}<pre>{% for p in proposals %}{{ p.toml(m.package) }}
{% endfor %}</pre>{% else %}<p>None: no version loads with one tested torch and breaks with another.</p>{% endif %}
</body></html>
""",
    autoescape=True,
)


def html_report(matrix: Matrix, proposals: list[Proposal], checks: list[RuleCheck]) -> str:
    page: str = _TEMPLATE.render(m=matrix, proposals=proposals, checks=checks, why=_why, mark=MARK)
    return page
