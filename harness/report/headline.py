"""The report's opening: per workload shape, one table of every run's key figures and their
changes against the group's baseline, with each run's warnings under it (HTML and Markdown).

Runs of different workloads or shapes sit in different groups and are never compared; a group
that does not hold the report's baseline says in one line why (`harness.analysis.shapes`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

from harness.analysis.shapes import ShapeGroup, shape_text
from harness.analysis.tables import key_figures, run_warnings
from harness.report.markup import md_table, md_text

LEGEND = ("Change against the group's baseline: value / baseline - 1 with its 95% bootstrap interval in brackets "
          "(accuracy: difference in percentage points, Agresti-Min interval). better / worse: the interval excludes "
          "zero (accuracy: exact McNemar p < 0.05); otherwise no clear change. Means over the ok requests; "
          "runs of different workloads or shapes are never compared.")


def _baseline_line(group: ShapeGroup) -> str:
    return f"Baseline: {group.baseline.caption}." + (f" This group is {group.apart}." if group.apart else "")


def _warnings(group: ShapeGroup) -> list[tuple[str, str]]:
    """(run caption, warning) of every run of the group that has any."""
    return [(run.caption, warning) for run in group.runs for warning in run_warnings(run)]


def _cell_html(value: object) -> str:
    if not isinstance(value, dict):
        return f"<td>{html.escape(str(value))}</td>"
    verdict = value["verdict"]
    kind = verdict.replace(" ", "-")
    # Change and verdict on lines of their own keep the column as narrow as its interval.
    change = (f"<span class='chg {kind}'>{html.escape(value['change'])}</span>"
              f"<span class='chg {kind}'>{html.escape(verdict)}</span>") if value["change"] else ""
    return f"<td class='num'>{html.escape(value['value'])}{change}</td>"


def key_table_html(frame: pd.DataFrame) -> str:
    """The key-figure table; a figure cell shows its value, and under it the change and the verdict."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = ["<tr>" + "".join(_cell_html(v) for v in row) + "</tr>" for row in frame.itertuples(index=False)]
    return f"<table class='key'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def headline_html(groups: Sequence[ShapeGroup]) -> str:
    parts = ["<section id='headline'>"]
    for group in groups:
        parts += [f"<h2>{html.escape(shape_text(group.baseline))}</h2>",
                  f"<p>{html.escape(_baseline_line(group))}</p>",
                  key_table_html(key_figures(group.runs, group.comparison))]
        warnings = _warnings(group)
        if warnings:
            items = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(w)}</li>" for n, w in warnings)
            parts.append(f"<ul class='warn'>{items}</ul>")
    parts.append(f"<p class='legend'>{html.escape(LEGEND)}</p></section>")
    return "".join(parts)


def _cell_md(value: object) -> str:
    if not isinstance(value, dict):
        return md_text(value)
    change = f" ({value['change']} {value['verdict']})" if value["change"] else ""
    return md_text(value["value"] + change)


def headline_markdown(groups: Sequence[ShapeGroup]) -> str:
    parts = []
    for group in groups:
        parts += [f"## {md_text(shape_text(group.baseline))}", md_text(_baseline_line(group)),
                  md_table(key_figures(group.runs, group.comparison), cell=_cell_md)]
        parts += [f"- **{md_text(name)}**: {md_text(warning)}" for name, warning in _warnings(group)]
    return "\n\n".join([*parts, md_text(LEGEND)])
