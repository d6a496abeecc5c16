"""The sweep section: `report.html` (self-contained) and `report.md` in the sweep folder.

It opens with what was measured and how each cell ended, then the saturation statements, the
curve and speed-up tables, and the figures. Every cell is an ordinary run: `sparkbench report`
on its run directory gives the full per-run detail.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

import pandas as pd

from harness.records.rundir import SCALE_LABEL
from harness.report.markup import as_text, html_table, md_table, md_text
from harness.report.report import STYLE
from harness.report.sweep_plots import CAPTIONS


def _percent(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    shown = frame.copy()
    for column in columns:
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v * 100:+.1f}%")
    return as_text(shown, "{:.4g}")


def sections(tables: dict[str, pd.DataFrame], sentences: list[str]) -> list[tuple[str, pd.DataFrame | list[str]]]:
    """(title, table or lines) in reading order."""
    if "rates" in tables:
        return [("Arrivals", sentences), ("Cells", as_text(tables["cells"], "{:.4g}")),
                ("Points by offered rate", as_text(tables["rates"], "{:.4g}"))]
    return [("Saturation", sentences),
            ("Cells", as_text(tables["cells"], "{:.4g}")),
            ("Throughput-latency points per cell", as_text(tables["curves"], "{:.4g}")),
            ("Speed-up over the baseline by concurrency", _percent(tables["speedup"], ["throughput_speedup",
                                                                                     "tpot_speedup"])),
            ("Saturation rule, step by step", _percent(tables["saturation"], ["throughput_gain", "tpot_rise"]))]


def render_html(title: str, notes: list[str], parts, figures: list[Path]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>", *(f"<p class='scale'>{html.escape(n)}</p>" for n in notes)]
    for heading, content in parts:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        body.append(html_table(content) if isinstance(content, pd.DataFrame)
                    else "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in content) + "</ul>")
    body.append("<h2>Figures</h2>")
    for png in (p for p in figures if p.suffix == ".png"):
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        caption = html.escape(CAPTIONS.get(png.stem, png.stem))
        body.append(f"<figure><img alt='{caption}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{caption}</figcaption></figure>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")


def render_markdown(title: str, notes: list[str], parts, figures: list[Path], out_dir: Path) -> str:
    lines = [f"# {md_text(title)}", *(f"**{md_text(n)}**" for n in notes)]
    for heading, content in parts:
        lines.append(f"## {md_text(heading)}")
        lines.append(md_table(content) if isinstance(content, pd.DataFrame)
                     else "\n".join(f"- {md_text(line)}" for line in content))
    lines.append("## Figures")
    lines += [f"![{md_text(CAPTIONS.get(p.stem, p.stem))}]({Path(os.path.relpath(p, out_dir)).as_posix()})"
              for p in figures if p.suffix == ".png"]
    return "\n\n".join(lines) + "\n"


def write_sweep_report(out_dir: Path, sweep_id: str, tables: dict[str, pd.DataFrame], sentences: list[str],
                       figures: list[Path], reduced: bool, baseline: str) -> tuple[Path, Path]:
    """Write report.html and report.md into out_dir; return their paths."""
    title = f"sparkbench sweep {sweep_id}"
    notes = [*([f"scale: {SCALE_LABEL}"] if reduced else []), f"baseline configuration: {baseline}",
             "Each cell is an ordinary run directory (cells/<cell_id>/<run_id>/): `sparkbench report` on it "
             "gives the full detail of that run."]
    parts = sections(tables, sentences)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(render_html(title, notes, parts, figures), encoding="utf-8")
    md_path.write_text(render_markdown(title, notes, parts, figures, out_dir), encoding="utf-8")
    return html_path, md_path
