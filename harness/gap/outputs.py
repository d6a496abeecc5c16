"""The design's tables and figure, written into its folder: `gap_cells.csv`, `gap_attribution.csv`,
`gap.md` (both tables, with the settings and where the runs are) and `gap.png`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.gap.design import FACTORS

CELL_COLUMNS = (
    ("speedup", "decode speed-up", "{:.3f}"), ("accept_length_token_weighted", "accept length (tokens)", "{:.2f}"),
    ("accept_length_request_weighted", "accept length (requests)", "{:.2f}"),
    ("plain_mean_output_tokens", "output tokens plain", "{:.0f}"), ("spec_mean_output_tokens", "output tokens spec", "{:.0f}"),
)
SHARE_NAMES = {"delta": "total change, synthetic corner -> GSM8K corner"}


def _with_interval(row: pd.Series, name: str, fmt: str) -> str:
    value = row.get(name, math.nan)
    if not isinstance(value, float) or not math.isfinite(value):
        return "not measured"
    low, high = row.get(f"{name}_low", math.nan), row.get(f"{name}_high", math.nan)
    text = fmt.format(value)
    return f"{text} [{fmt.format(low)}, {fmt.format(high)}]" if math.isfinite(low) and math.isfinite(high) else text


def cells_markdown(cells: pd.DataFrame) -> str:
    head = [*FACTORS, *(label for _, label, _ in CELL_COLUMNS), "decode timing"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in cells.iterrows():
        values = [row[f] for f in FACTORS] + [_with_interval(row, name, fmt) for name, _, fmt in CELL_COLUMNS]
        lines.append("| " + " | ".join([*values, row["timing"]]) + " |")
    return "\n".join(lines)


def attribution_markdown(attribution: pd.DataFrame) -> str:
    if attribution.empty:
        return "Attribution not computed: it needs all eight cells of the synthetic and gsm8k contents."
    lines = ["| figure | share | value [95% interval] |", "|---|---|---|"]
    for _, row in attribution.iterrows():
        interval = f" [{row['low']:+.3f}, {row['high']:+.3f}]" if math.isfinite(row["low"]) else ""
        value = f"{row['value']:+.3f}{interval}" if math.isfinite(row["value"]) else "not measured"
        lines.append(f"| {row['figure']} | {SHARE_NAMES.get(row['share'], row['share'])} | {value} |")
    return "\n".join(lines)


def write_outputs(folder: Path, cells: pd.DataFrame, attribution: pd.DataFrame, design: dict) -> Path:
    """Write the tables and the figure; return the Markdown file."""
    cells.to_csv(folder / "gap_cells.csv", index=False)
    attribution.to_csv(folder / "gap_attribution.csv", index=False)
    settings = design["settings"]
    text = "\n\n".join([
        f"# The synthetic-vs-GSM8K gap, by cause ({folder.name})",
        f"Plain: {design['profiles'].get('plain') or design['servers']['plain']}; speculative: "
        f"{design['profiles'].get('speculative') or design['servers']['speculative']}. {settings['prompts']} prompts "
        f"per content; fixed length {settings['fixed_tokens']} tokens (ignore_eos), natural length capped at "
        f"{settings['natural_cap']}; synthetic prompts of {settings['synthetic_input_tokens']} tokens. Runs: `runs/`.",
        "## Cells (95% paired bootstrap intervals over prompts)", cells_markdown(cells),
        "## Attribution of the change from the synthetic corner to the GSM8K corner", attribution_markdown(attribution),
    ])
    path = folder / "gap.md"
    path.write_text(text + "\n", encoding="utf-8")
    if not cells.empty:
        plot_cells(cells, folder / "gap.png")
    return path


def plot_cells(cells: pd.DataFrame, out: Path) -> Path:
    """Speed-up and token-weighted accept length per cell, grouped by content, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    labels = [f"{r.content}\n{r.sampling}/{r.length}" for r in cells.itertuples()]
    x = range(len(cells))
    for ax, (name, title) in zip(axes, (("speedup", "decode speed-up (spec / plain)"),
                                        ("accept_length_token_weighted", "accept length (tokens per round)"))):
        values = cells[name]
        errors = [values - cells[f"{name}_low"], cells[f"{name}_high"] - values]
        colors = ["#1f77b4" if r.sampling == "greedy" else "#ff7f0e" for r in cells.itertuples()]
        hatches = ["" if r.length == "fixed" else "//" for r in cells.itertuples()]
        for xi, value, color, hatch, low, high in zip(x, values, colors, hatches, *errors):
            ax.bar(xi, value, yerr=[[low], [high]], color=color, hatch=hatch, alpha=0.85)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel(title)
    axes[-1].set_xticks(list(x), labels, rotation=90, fontsize=7)
    axes[0].set_title("blue: greedy, orange: published sampling; plain bar: fixed length, hatched: natural")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
