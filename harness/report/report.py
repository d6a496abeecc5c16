"""The report of one or more runs: a self-contained HTML file and a Markdown twin.

`build_report` writes `report.html` (figures embedded as base64 PNG, styles inline, no external
file), `report.md` (figures linked relatively from `plots/`) and the figures themselves. Every
string that comes from a run (model output, server strings, workload spec, run ids) is escaped
with html.escape before it is written, in both files: a model output holding `<script>` shows as
text and never runs.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from harness.analysis.compare import baseline_run_id, compare_loaded
from harness.analysis.reference import provenance_notes, reference_table, reference_text
from harness.analysis.roofline import RooflineInputs
from harness.analysis.run import Run
from harness.analysis.tables import headline, power_note, stream_warning
from harness.metrics.roofline import Roofline
from harness.report.plots import plot_all
from harness.report.roofline_plots import plot_published_roofline, plot_run_roofline

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
}
STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
         "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}"
         "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left;vertical-align:top}"
         "th{background:#eee}pre{white-space:pre-wrap;margin:0}img{max-width:100%}"
         ".scale{color:#a00000;font-weight:bold}")
MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")
LEGEND = ("change = value / baseline - 1 (accuracy: difference in percentage points); 95% bootstrap "
          "interval (accuracy: Agresti-Min interval, exact McNemar p); paired = requests matched by prompt_id.")


def manifest_facts(run: Run) -> dict[str, str]:
    """The provenance a reader needs first, as strings (missing facts say so)."""
    m = run.manifest
    info = (m.get("server") or {}).get("server_info") or {}
    sampling = m.get("sampling") or {}
    return {
        "run_id": m.get("run_id", ""), "status": str(m.get("status")), "scale": str(m.get("scale")),
        "workload": m.get("workload", {}).get("name", ""), "requests recorded": str(m.get("requests_recorded")),
        "server version": str(info.get("version", "not recorded")), "engine / api": " / ".join(map(str, run.engine_and_api)),
        "server URL": str(m.get("server_url")), "model": str(info.get("model_path", "not recorded")),
        "started / ended": f"{m.get('started_at')} / {m.get('ended_at')}",
        "harness commit": str((m.get("git") or {}).get("commit")),
        "sampling": json.dumps(sampling, sort_keys=True),
        "workload spec": json.dumps(m.get("workload", {}), sort_keys=True),
    }


def comparison_view(comparison: pd.DataFrame) -> pd.DataFrame:
    """The comparison as strings for reading: changes in percent (accuracy in points)."""
    def pct(value: float, kind: str) -> str:
        return "" if pd.isna(value) else f"{value * 100:+.1f}{'%' if kind == 'relative' else ' pp'}"

    def num(value: float) -> str:
        return "" if pd.isna(value) else f"{value:.4g}"

    return pd.DataFrame({
        "run": comparison["run_id"], "metric": comparison["metric"], "stat": comparison["stat"],
        "value": comparison["value"].map(num), "unit": comparison["unit"],
        "baseline": comparison["baseline_value"].map(num),
        "change": [pct(v, k) for v, k in zip(comparison["change"], comparison["change_kind"])],
        "95% CI": ["" if pd.isna(lo) else f"{pct(lo, k)} .. {pct(hi, k)}"
                   for lo, hi, k in zip(comparison["ci95_low"], comparison["ci95_high"], comparison["change_kind"])],
        "paired": comparison["paired"].map(lambda p: "" if pd.isna(p) else ("yes" if p else "no")),
        "n": comparison["n"].astype(str), "McNemar p": comparison["p_value"].map(num),
    })


def as_text(frame: pd.DataFrame, number: str) -> pd.DataFrame:
    """Every cell as a string: floats through the `number` format, missing values empty."""
    def cell(v: object) -> str:
        return "" if pd.isna(v) else (number.format(v) if isinstance(v, float) else str(v))
    return frame.apply(lambda column: column.map(cell))


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
    lines = [f"energy: {power_note(run.manifest)}"]
    lines += [f"roofline (config: {why})", *found.lines()] if found else [f"roofline: not computed ({why})"]
    return "\n".join(lines)


def reference_view(runs: Sequence[Run]) -> pd.DataFrame:
    """Published figures beside the runs (`reference_table`), 6 significant digits, figures the
    sources do not state as such marked `*` (`provenance_notes` says how each was derived)."""
    return reference_text(reference_table([r.summary for r in runs])).reset_index()


# --- HTML -------------------------------------------------------------------------------------

def html_table(frame: pd.DataFrame, pre_columns: Sequence[str] = ()) -> str:
    """A table with every header and cell escaped; `pre_columns` keep their line breaks."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        cells = [f"<td><pre>{html.escape(str(v))}</pre></td>" if c in pre_columns else f"<td>{html.escape(str(v))}</td>"
                 for c, v in row.items()]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _facts_frame(run: Run) -> pd.DataFrame:
    return pd.DataFrame(list(manifest_facts(run).items()), columns=["fact", "value"])


def render_html(runs: Sequence[Run], comparison: pd.DataFrame, figures: Sequence[Path],
                rooflines: Sequence[tuple[Roofline | None, str]]) -> str:
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    baseline = html.escape(str(comparison["baseline_run_id"].iloc[0]))
    parts = [f"<h1>sparkbench report: {len(runs)} run(s)</h1>",
             f"<p>Generated {generated}. Baseline: {baseline}.</p>", "<h2>Runs</h2>"]
    for run in runs:
        parts += [f"<h3>{html.escape(run.label)}</h3>",
                  f"<p class='scale'>scale: {html.escape(str(run.manifest.get('scale')))}</p>",
                  *(f"<p class='scale'>{html.escape(w)}</p>" for w in [stream_warning(run.summary)] if w),
                  html_table(_facts_frame(run), pre_columns=["value"])]
    parts += ["<h2>Comparison against the baseline</h2>", f"<p>{html.escape(LEGEND)}</p>",
              html_table(comparison_view(comparison)),
              "<h2>Published figures beside the runs</h2>", html_table(reference_view(runs)),
              f"<pre>{html.escape(chr(10).join(provenance_notes()))}</pre>"]
    parts.append("<h2>Headline summary per run</h2>")
    for run, roofline in zip(runs, rooflines):
        parts += [f"<h3>{html.escape(run.label)}</h3>", html_table(headline_view(run)),
                  f"<pre>{html.escape(roofline_energy_lines(run, roofline))}</pre>"]
    parts.append("<h2>Figures</h2>")
    for png in (p for p in figures if p.suffix == ".png"):
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        caption = html.escape(CAPTIONS.get(png.stem, png.stem))
        parts.append(f"<figure><img alt='{caption}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{caption}</figcaption></figure>")
    parts.append("<h2>Sample outputs</h2>")
    for run in runs:
        parts += [f"<h3>{html.escape(run.label)}</h3>",
                  html_table(sample_outputs(run), pre_columns=["output_text"])]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>sparkbench report</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


# --- Markdown ---------------------------------------------------------------------------------

def md_text(value: object) -> str:
    """A string safe in a Markdown table cell: HTML-escaped, Markdown punctuation backslashed,
    line breaks as spaces."""
    text = html.escape(str(value), quote=False).replace("\r", " ").replace("\n", " ")
    return MD_SPECIAL.sub(r"\\\1", text)


def md_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(md_text(c) for c in frame.columns) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(md_text(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def render_markdown(runs: Sequence[Run], comparison: pd.DataFrame, figures: Sequence[Path],
                    out_dir: Path, rooflines: Sequence[tuple[Roofline | None, str]]) -> str:
    parts = [f"# sparkbench report: {len(runs)} run(s)",
             f"Baseline: {md_text(comparison['baseline_run_id'].iloc[0])}.", "## Runs"]
    for run in runs:
        parts += [f"### {md_text(run.label)}", *(f"**{md_text(w)}**" for w in [stream_warning(run.summary)] if w),
                  md_table(_facts_frame(run))]
    parts += ["## Comparison against the baseline", md_text(LEGEND), md_table(comparison_view(comparison)),
              "## Published figures beside the runs", md_table(reference_view(runs)),
              "\n".join(f"- {md_text(note)}" for note in provenance_notes()), "## Headline summary per run"]
    for run, roofline in zip(runs, rooflines):
        parts += [f"### {md_text(run.label)}", md_table(headline_view(run)),
                  "```\n" + roofline_energy_lines(run, roofline) + "\n```"]
    parts.append("## Figures")
    for png in (p for p in figures if p.suffix == ".png"):
        link = Path(os.path.relpath(png, out_dir)).as_posix()
        parts.append(f"![{md_text(CAPTIONS.get(png.stem, png.stem))}]({link})")
    parts.append("## Sample outputs")
    for run in runs:
        parts += [f"### {md_text(run.label)}", md_table(sample_outputs(run))]
    return "\n\n".join(parts) + "\n"


def find_run_dirs(root: Path | str) -> list[Path]:
    """Every run directory (a folder holding manifest.json) directly under root, sorted by name,
    which begins with the run's start time."""
    return sorted(path.parent for path in Path(root).glob("*/manifest.json"))


def build_report(runs: Sequence[Run | Path | str], out_dir: Path | str, baseline: Path | str | None = None,
                 extra_images: Sequence[Path] = (), inputs: RooflineInputs = RooflineInputs()) -> tuple[Path, Path]:
    """Write report.html, report.md and plots/ into out_dir; return (html_path, md_path).

    `runs`: loaded runs or run directories (loaded with `inputs`: the model config and ceiling of
    their decode rooflines, where the runs do not name them). `baseline` is a run directory or
    run_id (default: the first run). `extra_images`: figures made elsewhere (PNG embedded, others
    ignored), shown after the run figures.
    """
    out_dir = Path(out_dir)
    runs = [run if isinstance(run, Run) else Run.load(run, inputs) for run in runs]
    comparison = compare_loaded(runs, baseline_run_id(baseline))
    rooflines = [run.roofline for run in runs]
    plots = out_dir / "plots"
    figures = [*plot_all(runs, plots), *plot_published_roofline(plots),
               *plot_run_roofline([r.label for r in runs], [found for found, _ in rooflines], plots),
               *map(Path, extra_images)]
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(render_html(runs, comparison, figures, rooflines), encoding="utf-8")
    md_path.write_text(render_markdown(runs, comparison, figures, out_dir, rooflines), encoding="utf-8")
    return html_path, md_path
