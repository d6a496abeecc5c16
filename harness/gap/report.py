"""`sparkbench report DESIGN_FOLDER`: the gap design's own report, `report.html` (self-contained,
the figure embedded) and `report.md` (the figure linked), written inside the design folder.

It shows what `sparkbench gap` left there (`gap_cells.csv`, `gap_attribution.csv`, `gap.png`);
where any of those is missing it first computes and writes them from the runs, as
`sparkbench gap --analyse` does. Every cell the design planned has a row: one without both runs
shows its figures as not measured, and why is listed below the table.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from harness.gap.analysis import analyse_cells, load_cells
from harness.gap.design import FACTORS, cells
from harness.gap.outputs import (
    ATTRIBUTION_FILE,
    ATTRIBUTION_HEADING,
    CELLS_FILE,
    CELLS_HEADING,
    FIGURE_FILE,
    NO_ATTRIBUTION,
    attribution_markdown,
    attribution_view,
    cells_markdown,
    cells_view,
    settings_line,
    write_outputs,
)
from harness.gap.run import MANIFEST, load_design
from harness.records.rundir import MANIFEST_NAME, SCALE_LABEL, load_record
from harness.report.markup import embedded_figure, html_table, md_text, printable
from harness.report.report import STYLE
from harness.secrets import redact

NOT_MEASURED = "not measured"
CAPTION = ("Decode speed-up and accept length (tokens per round) per cell with 95% BCa intervals; "
           "blue greedy, orange published sampling; plain bar fixed length, hatched natural")
METHODS = ("One at a time: a factor's change from the synthetic corner with the other two held there; what the "
           "three leave over is the interaction. Shapley: a factor's change averaged over the six orders of moving "
           "the factors; the three shares add up to the total change.")
RUNS_NOTE = "Runs: under runs/, each an ordinary run directory (sparkbench report on one gives its full detail)."
NO_FIGURE = "No figure: no cell was measured."


def is_gap_design(folder: Path) -> bool:
    return (Path(folder) / MANIFEST).exists()


def gap_tables(folder: Path, design: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, attribution) as stored in the folder; computed from its runs and written first where
    a table or the figure is missing."""
    if all((folder / name).exists() for name in (CELLS_FILE, ATTRIBUTION_FILE, FIGURE_FILE)):
        return pd.read_csv(folder / CELLS_FILE), pd.read_csv(folder / ATTRIBUTION_FILE)
    measured, attribution = analyse_cells(load_cells(folder, design))
    write_outputs(folder, measured, attribution, design)
    return measured, attribution


def every_cell(measured: pd.DataFrame, design: dict) -> pd.DataFrame:
    """One row per cell the design planned, in its order; a cell without figures keeps its levels
    alone, which the table shows as not measured."""
    planned = pd.DataFrame([cell.to_dict() for cell in cells(tuple(design["settings"]["contents"]))])
    known = measured if not measured.empty else pd.DataFrame(columns=[*FACTORS, "timing"])
    rows = planned.merge(known, on=list(FACTORS), how="left")
    return rows.assign(timing=rows["timing"].fillna(NOT_MEASURED))


def unmeasured_reasons(measured: pd.DataFrame, design: dict) -> list[str]:
    """Why each planned cell has no figures: its runs' errors as gap.json recorded them, or that it
    was never run (a design stopped before reaching it)."""
    recorded = {(e["content"], e["sampling"], e["length"]): e for e in design["cells"]}
    done = set(measured[list(FACTORS)].itertuples(index=False, name=None)) if not measured.empty else set()
    lines = []
    for cell in cells(tuple(design["settings"]["contents"])):
        if cell.levels in done:
            continue
        entry = recorded.get(cell.levels)
        errors = "; ".join(f"{role} run: {error}" for role, error in (entry or {}).get("errors", {}).items())
        lines.append(f"{cell.name}: {errors or ('not run' if entry is None else 'its two runs are not both recorded')}")
    return lines


def reduced_scale(folder: Path, design: dict) -> bool:
    """Whether any run of the design served the test bed's tiny model."""
    paths = [folder / "runs" / name for entry in design["cells"] for name in entry.get("runs", {}).values()]
    return any(load_record(path).reduced_scale for path in paths if (path / MANIFEST_NAME).exists())


def gap_report(folder: Path) -> tuple[Path, Path]:
    """Write report.html and report.md into the design folder; return their paths."""
    folder = Path(folder)
    design = load_design(folder)
    measured, attribution = gap_tables(folder, design)
    notes = [*([f"scale: {SCALE_LABEL}"] if reduced_scale(folder, design) else []), settings_line(design), RUNS_NOTE]
    content = (every_cell(measured, design), unmeasured_reasons(measured, design), attribution)
    figure = folder / FIGURE_FILE
    html_path, md_path = folder / "report.html", folder / "report.md"
    title = f"sparkbench gap {folder.name}"
    html_path.write_text(printable(redact(_html(title, notes, *content, figure))), encoding="utf-8")
    md_path.write_text(printable(redact(_markdown(title, notes, *content, figure))), encoding="utf-8")
    return html_path, md_path


def _html(title: str, notes: list[str], rows: pd.DataFrame, reasons: list[str], attribution: pd.DataFrame,
          figure: Path) -> str:
    body = [f"<h1>{html.escape(title)}</h1>", *(f"<p>{html.escape(note)}</p>" for note in notes),
            f"<h2>{html.escape(CELLS_HEADING)}</h2>", html_table(cells_view(rows))]
    if reasons:
        body += ["<h3>Not measured</h3>", "<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in reasons) + "</ul>"]
    body += [f"<h2>{html.escape(ATTRIBUTION_HEADING)}</h2>",
             f"<p>{html.escape(NO_ATTRIBUTION)}</p>" if attribution.empty
             else f"<p>{html.escape(METHODS)}</p>{html_table(attribution_view(attribution))}",
             "<h2>Figure</h2>", embedded_figure(figure, CAPTION) if figure.exists() else f"<p>{NO_FIGURE}</p>"]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")


def _markdown(title: str, notes: list[str], rows: pd.DataFrame, reasons: list[str], attribution: pd.DataFrame,
              figure: Path) -> str:
    lines = [f"# {md_text(title)}", *(md_text(note) for note in notes), f"## {CELLS_HEADING}", cells_markdown(rows)]
    if reasons:
        lines += ["### Not measured", "\n".join(f"- {md_text(r)}" for r in reasons)]
    lines += [f"## {ATTRIBUTION_HEADING}", *([] if attribution.empty else [METHODS]), attribution_markdown(attribution),
              "## Figure", f"![{md_text(CAPTION)}]({figure.name})" if figure.exists() else NO_FIGURE]
    return "\n\n".join(lines) + "\n"
