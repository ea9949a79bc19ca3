"""One self-contained HTML page of a run (``wss report --html``) and of a timing check (``wss check --html``).

The page loads nothing: the style sheet is inline, the figures are inline SVG (fonts drawn as
paths), there is no script, and a Content-Security-Policy forbids any fetch, so it opens the same
from a CI artifact, an e-mail or a laptop offline.  The same Result gives the same bytes: the SVG
ids come from a fixed salt, the figures carry no date, and nothing reads the clock.

Every string that comes from the user's files (scenario names, file names, error messages) is
escaped with :func:`html.escape`.  Like the other views, this reads a Result (or rows a command
made) and never runs the model.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wss.files import atomic_write_text
from wss.model.result.results import BREAKDOWN_CATEGORIES, Result
from wss.views.summary import fmt_time, format_result

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from wss.model.plan.choice import CandidateCost, PlanChoice

__all__ = ["CheckedScenario", "figure_svg", "result_page", "write_result_page", "check_page", "write_check_page"]

#: No fetch of any kind: inline styles, no scripts, images only from data: URLs (none are used).
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 78rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: 0.75rem; white-space: pre-wrap; font-size: 0.85rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { padding: 0.2rem 0.6rem; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.headline { font-size: 1.1rem; } .muted { color: #666; }
.bar { background: #4c78a8; height: 0.8rem; display: inline-block; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
tr.regressed td, tr.missing td, .status-regressed, .status-error { color: #b00020; font-weight: 600; }
tr.improved td, .status-ok { color: #1b7e3c; }
"""


def _esc(text: object) -> str:
    """``text`` safe inside an element or a quoted attribute."""
    return html.escape(str(text), quote=True)


def _page(title: str, sections: Sequence[str]) -> str:
    """A whole HTML document: ``title`` (plain text) and the already-escaped ``sections``."""
    head = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n")
    return head + "\n".join(sections) + "\n</body>\n</html>\n"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], aligns: str = "",
           row_classes: Sequence[str] = ()) -> str:
    """An HTML table of plain-text cells (escaped here); ``aligns`` has ``">"`` for a right-aligned column."""
    aligns = aligns or "<" * len(header)

    def cls(i: int) -> str:
        return ' class="num"' if aligns[i] == ">" else ""

    head = "".join(f"<th{cls(i)}>{_esc(h)}</th>" for i, h in enumerate(header))
    body = []
    for n, row in enumerate(rows):
        rc = f' class="{_esc(row_classes[n])}"' if n < len(row_classes) and row_classes[n] else ""
        body.append(f"<tr{rc}>" + "".join(f"<td{cls(i)}>{_esc(c)}</td>" for i, c in enumerate(row)) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"


def figure_svg(fig: Figure, prefix: str) -> str:
    """``fig`` as an inline ``<svg>`` element, the same bytes every time.

    Text is drawn as paths (no font to fetch), ids come from a fixed salt and carry ``prefix`` so
    that several figures in one page do not share an id, and the XML prologue and the metadata
    block (a date, a generator) and the comments repeating each text are dropped.
    """
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "wss-html-report", "svg.id": None}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    svg = re.sub(r"\s*<!--.*?-->", "", svg, flags=re.DOTALL)  # the text drawn as paths, repeated (escaped)
    svg = re.sub(r'(\bid="|href="#|url\(#)(?=[^"#)])', rf"\g<1>{prefix}-", svg)
    return svg.strip()


def _summary_section(result: Result, source: str) -> str:
    n = len(result.steps)
    where = f' <span class="muted">from {_esc(source)}</span>' if source else ""
    return (f"<h1>wss report: {_esc(result.scenario.name)}</h1>\n"
            f'<p class="headline">step time <strong>{_esc(fmt_time(result.step_time_s))}</strong> '
            f"(mean of {n} step{'s' if n > 1 else ''}), bound by {_esc(result.bound_by)}{where}</p>\n"
            f'<h2 id="summary">Summary</h2>\n<pre>{_esc(format_result(result))}</pre>')


def _candidate_cells(c: CandidateCost, best_s: float) -> list[str]:
    gap = f"{c.step_time_s / best_s - 1.0:+.0%}" if best_s > 0 else ""
    return [c.checkpointing, c.split(), fmt_time(c.step_time_s), gap, fmt_time(c.compute_s), fmt_time(c.stream_s),
            fmt_time(c.other_s), c.bound_by, f"{c.weight_crossings:.3g}"]


def _plan_section(choice: PlanChoice | None) -> str:
    """The candidate the plan runs and the alternatives it weighed (analytic step times)."""
    if choice is None:
        return ('<h2 id="plan">Plan</h2>\n<p>This result carries no plan choice (written before wss recorded '
                "the alternatives it weighed).</p>")
    header = ["", "checkpointing", "micro-batches", "step (analytic)", "vs chosen", "compute", "stream", "other",
              "bound by", "weight crossings"]
    best = choice.chosen.step_time_s
    rows = [["chosen", *_candidate_cells(choice.chosen, best)]]
    rows += [[f"alternative {i}", *_candidate_cells(c, best)] for i, c in enumerate(choice.alternatives, 1)]
    return (f'<h2 id="plan">Plan</h2>\n<p>{_esc(choice.line())}</p>\n'
            f"<p>Why: {_esc(choice.reason)}.</p>\n" + _table(header, rows, "<<<>>>>><>"))


def _breakdown_section(result: Result) -> str:
    """Seconds per step by category, with a bar for each share of the step."""
    rows = []
    step = result.step_time_s
    for c in BREAKDOWN_CATEGORIES:
        v = result.breakdown_s[c]
        if v > 0:
            share = v / step if step > 0 else 0.0
            rows.append(f'<tr><td>{_esc(c)}</td><td class="num">{_esc(fmt_time(v))}</td>'
                        f'<td class="num">{share:.1%}</td><td><span class="bar" style="width: '
                        f'{min(share, 1.0) * 20:.2f}rem"></span></td></tr>')
    paces = result.pacing_s[result.bound_by] / step if step > 0 else 0.0
    return (f'<h2 id="time">Where the time went (per step)</h2>\n<p>Bound by {_esc(result.bound_by)} '
            f"(paces {paces:.0%} of the step).</p>\n"
            '<table>\n<thead><tr><th>category</th><th class="num">time</th><th class="num">share</th><th></th>'
            "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>")


def _kernel_section(result: Result) -> str:
    """Every kernel's time per step, longest first (``wss report --by kernel --sort duration --limit 0``)."""
    from wss.views.report import format_totals, group_rows, kernel_table, sort_rows, table_cells

    rows = sort_rows(group_rows(kernel_table(result), "kernel", steps=len(result.steps)), "duration")
    header, aligns, cells = table_cells(rows, "kernel")
    return ('<h2 id="kernels">Per kernel (per step, longest first)</h2>\n'
            "<p>The table of <code>wss report RESULT.json --by kernel --sort duration --limit 0</code>.</p>\n"
            + _table(header, cells, aligns) + f"\n<pre>{_esc(format_totals(result))}</pre>")


def _figures_section(result: Result) -> str:
    """The timeline (from the result's records), per-kernel, utilisation and memory figures, inline."""
    from wss.views.plots import (
        gantt_figure,
        kernel_breakdown_figure,
        memory_figure,
        utilisation_figure,
        wafers_figure,
    )

    figures = [("timeline", "Timeline of the last step, from the result's records", gantt_figure(result)),
               ("kernels", "Time per kernel (all phases)", kernel_breakdown_figure(result)),
               ("utilisation", "Utilisation of each part", utilisation_figure(result)),
               ("memory", "Memory footprint against capacity", memory_figure(result))]
    if result.wafers:
        figures.append(("wafers", "Each wafer's step (an unfolded run)", wafers_figure(result)))
    parts = ['<h2 id="figures">Figures</h2>']
    for name, caption, fig in figures:
        parts.append(f'<figure id="figure-{name}">\n{figure_svg(fig, f"fig-{name}")}\n'
                     f"<figcaption>{_esc(caption)}</figcaption>\n</figure>")
    return "\n".join(parts)


def _verdict_section(verdict: str | None) -> str:
    if verdict is None:
        return ('<h2 id="verdict">Verdict</h2>\n<p class="muted">Not asked for: <code>wss report RESULT.json '
                "--verdict --html FILE</code> re-simulates with each bottleneck relaxed and puts the verdict "
                "here.</p>")
    return f'<h2 id="verdict">Verdict</h2>\n<pre>{_esc(verdict)}</pre>'


def _perfetto_section() -> str:
    """How to see every span of the run in Perfetto (docs/timeline.md); the page itself loads nothing."""
    return ('<h2 id="trace">Open the trace in Perfetto</h2>\n'
            "<p>The timeline above is drawn from the result's per-pass records. For every part's spans "
            "(weight stream, SwarmX levels, stalls by cause, optimizer), record a trace and open it in "
            "Perfetto:</p>\n"
            "<pre>wss simulate SCENARIO.yaml -o OUTDIR --trace OUTDIR/trace.json.gz</pre>\n"
            "<p>Then open ui.perfetto.dev in a browser and drop <code>trace.json.gz</code> on it (or load the "
            "uncompressed <code>.json</code> in <code>chrome://tracing</code>). docs/timeline.md, "
            '"Opening the trace", says what each track shows.</p>')


def result_page(result: Result, verdict: str | None = None, source: str = "") -> str:
    """The HTML page of a run: summary, plan, breakdown, per-kernel table, figures, verdict, trace.

    ``verdict`` is the text of :meth:`wss.studies.verdict.Verdict.format` when one was asked for;
    ``source`` names the result file on the page.
    """
    sections = [_summary_section(result, source), _plan_section(result.plan_choice), _breakdown_section(result),
                _verdict_section(verdict), _kernel_section(result), _figures_section(result), _perfetto_section(),
                f'<p class="muted">Simulated with wss {_esc(result.wss_version)}.</p>']
    return _page(f"wss report: {result.scenario.name}", sections)


def write_result_page(path: str | Path, result: Result, verdict: str | None = None, source: str = "") -> Path:
    """Write :func:`result_page` atomically; return the path."""
    return atomic_write_text(path, result_page(result, verdict, source))


@dataclass(frozen=True)
class CheckedScenario:
    """One scenario of a ``wss check``, as the page shows it.

    ``rows`` are the cells of :func:`wss.studies.check.table_cells` under ``header`` (every metric),
    empty when the scenario could not be compared; ``error`` is the one-line error then.
    """

    scenario_file: str
    baseline_file: str
    status: str
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    error: str | None = None
    note: str = ""


def _verdict_class(verdict: str) -> str:
    """A row's CSS class from its verdict cell: ``REGRESSED`` -> ``regressed``; a not-gated row gets none."""
    return "" if "(not gated)" in verdict else re.split(r"[^A-Za-z]", verdict, maxsplit=1)[0].lower()


def _overview(scenarios: Sequence[CheckedScenario]) -> str:
    """One line per scenario, linked to its section: status, file and the rows beyond plain ok."""
    rows = []
    for i, s in enumerate(scenarios):
        notable = sum(1 for row in s.rows if row[-1] != "ok")
        what = f"{notable} of {len(s.rows)} metrics not plainly ok" if s.rows else s.error or s.note
        rows.append(f'<tr><td class="status-{_esc(s.status)}">{_esc(s.status)}</td>'
                    f'<td><a href="#scenario-{i}">{_esc(s.scenario_file)}</a></td><td>{_esc(what)}</td></tr>')
    return ("<table>\n<thead><tr><th>status</th><th>scenario</th><th>metrics</th></tr></thead>\n<tbody>\n"
            + "\n".join(rows) + "\n</tbody>\n</table>")


def _scenario_section(i: int, s: CheckedScenario) -> str:
    title = (f'<h2 id="scenario-{i}"><span class="status-{_esc(s.status)}">{_esc(s.status)}</span> '
             f"{_esc(s.scenario_file)}</h2>")
    lines = [title, f'<p class="muted">baseline {_esc(s.baseline_file)}</p>']
    if s.error is not None:
        lines.append(f'<p class="status-error">{_esc(s.error)}</p>')
    if s.note:
        lines.append(f"<p>{_esc(s.note)}</p>")
    if s.rows:
        verdicts = [row[-1] for row in s.rows]
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v] = counts.get(v, 0) + 1
        lines.append(f"<p>{len(s.rows)} metrics: " + _esc(", ".join(f"{n} {v}" for v, n in counts.items())) + "</p>")
        lines.append(_table(s.header, s.rows, "<>>>><", [_verdict_class(v) for v in verdicts]))
    return "\n".join(lines)


def check_page(scenarios: Sequence[CheckedScenario], summary: str, exit_code: int) -> str:
    """The HTML page of a ``wss check``: ``summary`` (the counts line), the exit code, then every scenario."""
    head = (f"<h1>wss check: {_esc(summary)}</h1>\n<p>exit code {exit_code} (0: every gating metric holds; 1: "
            "a gating metric regressed; 2: bad input)</p>")
    return _page(f"wss check: {summary}", [head, _overview(scenarios),
                                            *(_scenario_section(i, s) for i, s in enumerate(scenarios))])


def write_check_page(path: str | Path, scenarios: Sequence[CheckedScenario], summary: str, exit_code: int) -> Path:
    """Write :func:`check_page` atomically; return the path."""
    return atomic_write_text(path, check_page(scenarios, summary, exit_code))
