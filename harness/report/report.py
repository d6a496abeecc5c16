"""The report of one or more runs: a self-contained HTML file and a Markdown twin.

`build_report` writes `report.html` (figures embedded as base64 PNG, styles inline, no external
file), `report.md` (figures linked relatively from `plots/`) and the figures themselves. The page
opens with the headline (`harness.report.headline`: per workload shape, the key figures of every
run and their changes against the group's baseline, with each run's warnings), then the figures of
each shape group and the published ones, then the details, collapsed: facts and provenance, every
compared figure, the published figures beside the runs, each run's summary, sample outputs. Runs
are named by their captions (label, concurrency, REDUCED SCALE, status) everywhere. Every string
that comes from a run is escaped (`harness.report.markup`) in both files.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from harness.analysis.categories import category_speedups, category_table
from harness.analysis.compare import baseline_run_id
from harness.analysis.reference import provenance_notes, reference_table, reference_text
from harness.analysis.roofline import RooflineInputs
from harness.analysis.run import Run
from harness.analysis.shapes import ShapeGroup, compare_by_shape, shape_text
from harness.analysis.tables import counter_note, headline, power_note, run_warnings
from harness.metrics.roofline import Roofline
from harness.records.rundir import SCALE_LABEL
from harness.report.acceptance_section import acceptance_blocks, acceptance_html, acceptance_markdown
from harness.report.category_plots import (
    plot_accept_length_along_output,
    plot_acceptance_by_position,
    plot_task_speedups,
)
from harness.report.category_section import categories_html, categories_markdown, category_blocks
from harness.report.headline import headline_html, headline_markdown
from harness.report.load_plots import LOAD_CAPTIONS, plot_timeline
from harness.report.markup import as_text, html_table, md_table, md_text, printable
from harness.report.plots import plot_published_ladder, plot_runs
from harness.report.roofline_plots import plot_published_roofline, plot_run_roofline
from harness.report.timeline import has_timeline, plot_run_timeline
from harness.secrets import redact

SAMPLE_OUTPUTS = 3  # model outputs shown per run
SAMPLE_CHARS = 400
CAPTIONS = {
    "decode_throughput": "Decode throughput per run with 95% bootstrap intervals",
    "latency_cdf": "End-to-end latency CDF per run, P50 and P95 marked",
    "tpot_vs_output_length": "TPOT against output length, one point per request",
    "accept_length": "Accept length per request (speculative decoding)",
    "output_length": "Output length distribution per run",
    "published_ladder": "Published ablation ladder (synthetic, DGX Spark)",
    "published_roofline": "Decode roofline of the published ladder: achieved GB/s against DGX Spark's 273 GB/s (derived)",
    "run_roofline": "Decode roofline per run: achieved GB/s against the device ceiling",
    "task_speedup": "Speed-up against the plain baseline and accept length per task, 95% paired intervals",
    "acceptance_by_position": "Acceptance at each draft position given the earlier ones, per run and per category",
    "accept_length_along_output": "Tokens per verify step along the output, by output-position bin",
    **LOAD_CAPTIONS,
}
STYLE = ("body{font-family:system-ui,sans-serif;max-width:1400px;margin:auto;padding:0.5em 1.5em;color:#222}"
         "h1{margin:0.3em 0 0.1em}h2{margin:1.2em 0 0.3em}p{margin:0.3em 0}"
         "table{border-collapse:collapse;margin:0.5em 0 1em;font-size:0.85em}"
         "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left;vertical-align:top}"
         "th{background:#eee}pre{white-space:pre-wrap;margin:0}img{max-width:100%}"
         "table.key{font-size:0.95em}table.key td{white-space:nowrap}table.key td.num{text-align:right}"
         ".chg{display:block;font-size:0.8em;color:#555}.chg.better{color:#176b1c;font-weight:bold}"
         ".chg.worse{color:#a00000;font-weight:bold}.meta,.legend{color:#555;font-size:0.85em}"
         ".scale,.warn{color:#a00000}.scale{font-weight:bold}ul.warn{margin:0.2em 0 1em;font-size:0.9em}"
         ".figs{display:flex;flex-wrap:wrap;gap:1em}.figs figure{flex:1 1 640px;margin:0}"
         "figcaption{font-size:0.85em;color:#555}details{margin:0.4em 0}"
         "summary{cursor:pointer;font-weight:bold;font-size:1.05em;padding:0.3em 0}")
LEGEND = ("change = value / baseline - 1 (accuracy: difference in percentage points); 95% bootstrap "
          "interval (accuracy: Agresti-Min interval, exact McNemar p); paired = requests matched by prompt_id; "
          "verdict: better / worse when the interval excludes zero (accuracy: McNemar p < 0.05).")


def manifest_facts(run: Run) -> dict[str, str]:
    """The provenance a reader needs first, as strings (missing facts say so)."""
    record = run.record
    sampling = record.sampling.as_recorded() if record.sampling else {}
    return {
        "run_id": record.run_id, "label": run.label, "concurrency": str(run.concurrency),
        "status": run.status, "error": str(record.error), "scale": str(record.scale),
        "workload": record.workload.name, "requests recorded": str(record.requests_recorded),
        "server version": run.facts.shown("version"), "engine / api": " / ".join(map(str, run.engine_and_api)),
        "server URL": str(record.server_url), "model": run.facts.shown("model"),
        "speculative decoding": run.facts.speculation_shown(),
        "speculative counters (server)": counter_note(record.server_counters),
        "server profiler": record.server_profile.note if record.server_profile else "not profiled",
        "started / ended": f"{record.started_at} / {record.ended_at}",
        "harness commit": str(record.git.commit if record.git else None),
        "sampling": json.dumps(sampling, sort_keys=True),
        "workload spec": json.dumps(record.workload.as_recorded(), sort_keys=True),
    }


def comparison_view(comparison: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """The comparison as strings for reading: runs by `names` (run_id -> name), changes in percent
    (accuracy in points)."""
    def pct(value: float, kind: str) -> str:
        return "" if pd.isna(value) else f"{value * 100:+.1f}{'%' if kind == 'relative' else ' pp'}"

    def num(value: float) -> str:
        return "" if pd.isna(value) else f"{value:.4g}"

    return pd.DataFrame({
        "run": comparison["run_id"].map(names), "metric": comparison["metric"], "stat": comparison["stat"],
        "value": comparison["value"].map(num), "unit": comparison["unit"],
        "baseline": comparison["baseline_value"].map(num),
        "change": [pct(v, k) for v, k in zip(comparison["change"], comparison["change_kind"])],
        "95% CI": ["" if pd.isna(lo) else f"{pct(lo, k)} .. {pct(hi, k)}"
                   for lo, hi, k in zip(comparison["ci95_low"], comparison["ci95_high"], comparison["change_kind"])],
        "paired": comparison["paired"].map(lambda p: "" if pd.isna(p) else ("yes" if p else "no")),
        "n": comparison["n"].astype(str), "McNemar p": comparison["p_value"].map(num),
        "verdict": comparison["verdict"],
    })


def headline_view(run: Run) -> pd.DataFrame:
    """The run's headline summary (tables.headline) with numbers as strings."""
    return as_text(headline(run.summary).reset_index(), "{:.4g}")


def sample_outputs(run: Run) -> pd.DataFrame:
    """The first requests' outputs, cut to SAMPLE_CHARS characters."""
    rows = run.derived.head(SAMPLE_OUTPUTS)
    return pd.DataFrame({
        "prompt_id": rows["prompt_id"].astype(str), "completion_tokens": rows["completion_tokens"].astype(str),
        "finish_reason": rows["finish_reason"].astype(str),
        "output_text": rows["output_text"].fillna("").astype(str).str.slice(0, SAMPLE_CHARS),
    })


def roofline_energy_lines(run: Run, roofline: tuple[Roofline | None, str]) -> str:
    """How the run's energy was measured, and its decode roofline with every assumption."""
    found, why = roofline
    lines = [f"energy: {power_note(run.record.power)}"]
    lines += [f"roofline (config: {why})", *found.lines()] if found else [f"roofline: not computed ({why})"]
    return "\n".join(lines)


def reference_view(runs: Sequence[Run]) -> pd.DataFrame:
    """Published figures beside the runs (`reference_table`, one column per run named by its
    caption), 6 significant digits, figures the sources do not state as such marked `*`
    (`provenance_notes` says how each was derived)."""
    names = {run.run_id: run.caption for run in runs}
    return reference_text(reference_table([r.summary for r in runs])).rename(columns=names).reset_index()


def _facts_frame(run: Run) -> pd.DataFrame:
    return pd.DataFrame(list(manifest_facts(run).items()), columns=["fact", "value"])


class Page:
    """What both files show, in reading order: the runs, their shape groups, the figures as
    (heading, paths) sections, and each run's name."""

    def __init__(self, runs: Sequence[Run], groups: Sequence[ShapeGroup], figures: Sequence[tuple[str, list[Path]]]):
        self.runs, self.groups, self.figures = list(runs), list(groups), list(figures)
        self.names = {run.run_id: run.caption for run in runs}
        self.categories = category_blocks(self.groups)
        self.acceptance = acceptance_blocks(self.groups)

    def details(self) -> list[tuple[str, list[tuple[str, str, pd.DataFrame | None]]]]:
        """Collapsed sections: (summary, [(heading, text, table)])."""
        runs = [(f"{self.names[r.run_id]} [{r.run_id}]", "\n".join(run_warnings(r)), _facts_frame(r)) for r in self.runs]
        compared = [(shape_text(g.baseline), LEGEND, comparison_view(g.comparison, self.names)) for g in self.groups]
        summaries = [(self.names[r.run_id], roofline_energy_lines(r, r.roofline), headline_view(r)) for r in self.runs]
        return [("Runs: facts and provenance", runs), ("Every compared figure against the baseline", compared),
                ("Published figures beside the runs", [("", "\n".join(provenance_notes()), reference_view(self.runs))]),
                ("Summary of each run, energy and decode roofline", summaries),
                ("Sample outputs", [(self.names[r.run_id], "", sample_outputs(r)) for r in self.runs])]


# --- HTML -------------------------------------------------------------------------------------

def _figures_html(page: Page) -> list[str]:
    parts = ["<h2>Figures</h2>"]
    for heading, paths in page.figures:
        items = []
        for png in (p for p in paths if p.suffix == ".png"):
            data = base64.b64encode(png.read_bytes()).decode("ascii")
            caption = html.escape(CAPTIONS.get(png.stem, png.stem))
            items.append(f"<figure><img alt='{caption}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{caption}</figcaption></figure>")
        parts += [f"<h3>{html.escape(heading)}</h3>", f"<div class='figs'>{''.join(items)}</div>"]
    return parts


def _details_html(page: Page) -> list[str]:
    parts = ["<h2>Details</h2>"]
    for summary, blocks in page.details():
        inner = []
        for heading, text, table in blocks:
            inner += [f"<h3>{html.escape(heading)}</h3>" if heading else "",
                      f"<pre>{html.escape(text)}</pre>" if text else "",
                      html_table(table, pre_columns=["value", "output_text"])]
        parts.append(f"<details><summary>{html.escape(summary)}</summary>{''.join(inner)}</details>")
    return parts


def render_html(page: Page) -> str:
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    parts = ["<h1>sparkbench report</h1>",
             f"<p class='meta'>{len(page.runs)} run(s) in {len(page.groups)} group(s) of one workload shape; "
             f"generated {generated}.</p>"]
    if any(r.reduced_scale for r in page.runs):
        parts.append(f"<p class='scale'>{html.escape(SCALE_LABEL)}: runs marked REDUCED SCALE exercise the harness "
                     "and say nothing about a real deployment.</p>")
    parts += [headline_html(page.groups), *categories_html(page.categories), *acceptance_html(page.acceptance),
              *_figures_html(page),
              *_details_html(page)]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>sparkbench report</title>"
            f"<meta name='viewport' content='width=device-width'><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")


# --- Markdown ---------------------------------------------------------------------------------

def render_markdown(page: Page, out_dir: Path) -> str:
    parts = ["# sparkbench report", f"{len(page.runs)} run(s) in {len(page.groups)} group(s) of one workload shape."]
    if any(r.reduced_scale for r in page.runs):
        parts.append(f"**{md_text(SCALE_LABEL)}**")
    parts += [headline_markdown(page.groups), *categories_markdown(page.categories),
              *acceptance_markdown(page.acceptance), "## Figures"]
    for heading, paths in page.figures:
        parts.append(f"### {md_text(heading)}")
        parts += [f"![{md_text(CAPTIONS.get(p.stem, p.stem))}]({Path(os.path.relpath(p, out_dir)).as_posix()})"
                  for p in paths if p.suffix == ".png"]
    parts.append("## Details")
    for summary, blocks in page.details():
        parts.append(f"<details><summary>{md_text(summary)}</summary>")
        for heading, text, table in blocks:
            parts += [f"### {md_text(heading)}" if heading else "", md_text(text) if text else "", md_table(table)]
        parts.append("</details>")
    return "\n\n".join(p for p in parts if p) + "\n"


def find_run_dirs(root: Path | str) -> list[Path]:
    """Every run directory (a folder holding manifest.json) directly under root, sorted by name,
    which begins with the run's start time."""
    return sorted(path.parent for path in Path(root).glob("*/manifest.json"))


def group_figures(group: ShapeGroup, out_dir: Path) -> list[Path]:
    """The run figures and decode rooflines of one shape group's runs, then each run's timeline."""
    rooflines = [run.roofline[0] for run in group.runs]
    timelines = [path for i, run in enumerate(group.runs, 1) if has_timeline(run)
                 for path in plot_run_timeline(run, out_dir, f"timeline-{i}")]
    return [*plot_runs(group.runs, out_dir), *plot_timeline(group.runs, out_dir),
            *plot_run_roofline([run.caption for run in group.runs], rooflines, out_dir),
            *plot_acceptance_by_position(group.runs, out_dir), *plot_accept_length_along_output(group.runs, out_dir),
            *timelines]


def task_figures(groups: Sequence[ShapeGroup], out_dir: Path) -> list[Path]:
    """Speed-up and accept length per task of every speculative run against its group's baseline,
    Spec-Bench's tasks beside whole GSM8K or synthetic runs."""
    entries = []
    for group in groups:
        for run in group.runs:
            speculates = run is not group.baseline and run.measured["accept_length"].notna().any()
            speedups = category_speedups(group.baseline, run) if speculates else None
            if speedups is not None and not speedups.empty:
                entries.append((run, speedups, category_table(run)))
    return plot_task_speedups(entries, out_dir)


def build_report(runs: Sequence[Run | Path | str], out_dir: Path | str, baseline: Path | str | None = None,
                 extra_images: Sequence[Path] = (), inputs: RooflineInputs = RooflineInputs()) -> tuple[Path, Path]:
    """Write report.html, report.md and plots/ into out_dir; return (html_path, md_path).

    `runs`: loaded runs or run directories (loaded with `inputs`: the model config and ceiling of
    their decode rooflines, where the runs do not name them). `baseline` is a run directory or
    run_id (default: the first run); it leads its shape group, and every other group is compared
    against its own first run. Each group's figures go to plots/<n>-<workload>/, the published
    ones to plots/. `extra_images`: figures made elsewhere (PNG embedded, others ignored), shown last.
    """
    out_dir = Path(out_dir)
    runs = [run if isinstance(run, Run) else Run.load(run, inputs) for run in runs]
    groups = compare_by_shape(runs, baseline_run_id(baseline))
    plots = out_dir / "plots"
    figures = [(shape_text(g.baseline), group_figures(g, plots / f"{i}-{g.baseline.workload}"))
               for i, g in enumerate(groups, 1)]
    tasks = task_figures(groups, plots)
    if tasks:
        figures.append(("Speculation per task", tasks))
    figures.append(("Published figures (not measured here)", [*plot_published_ladder(plots), *plot_published_roofline(plots)]))
    if extra_images:
        figures.append(("More figures", list(map(Path, extra_images))))
    page = Page(runs, groups, figures)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(printable(redact(render_html(page))), encoding="utf-8")
    md_path.write_text(printable(redact(render_markdown(page, out_dir))), encoding="utf-8")
    return html_path, md_path
