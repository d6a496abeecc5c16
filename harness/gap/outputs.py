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
BASE_NAMES = {"synthetic": "synthetic", "synthetic-matched": "synthetic at GSM8K prompt lengths"}
NO_ATTRIBUTION = ("Attribution not computed: it needs all eight cells of the gsm8k content and of synthetic or "
                  "synthetic-matched.")
CELLS_HEADING = "Cells (95% BCa bootstrap intervals over prompts, resampled jointly within a content)"
ATTRIBUTION_HEADING = "Attribution of the change from the synthetic corner to the GSM8K corner"
MATCHED_NOTE = ", synthetic-matched prompts as long as the GSM8K prompts, one by one"
CELLS_FILE, ATTRIBUTION_FILE, FIGURE_FILE = "gap_cells.csv", "gap_attribution.csv", "gap.png"


def _with_interval(row: pd.Series, name: str, fmt: str) -> str:
    value = row.get(name, math.nan)
    if not isinstance(value, float) or not math.isfinite(value):
        return "not measured"
    low, high = row.get(f"{name}_low", math.nan), row.get(f"{name}_high", math.nan)
    return fmt.format(value) + _interval_text(low, high, row.get(f"{name}_needs_prompts", 0), fmt)


def _interval_text(low: float, high: float, needs: float, fmt: str) -> str:
    """" [low, high]"; where the design has too few prompts for this kind of interval to cover,
    how many it needs instead; nothing where no interval could be formed."""
    if isinstance(needs, (int, float)) and math.isfinite(needs) and needs > 0:
        return f" (no interval: needs {int(needs)} prompts per content)"
    return f" [{fmt.format(low)}, {fmt.format(high)}]" if math.isfinite(low) and math.isfinite(high) else ""


def cells_view(cells: pd.DataFrame) -> pd.DataFrame:
    """The cell table as shown: each cell's levels, every figure with its interval (or "not measured"),
    and which decode times the speed-up used."""
    head = [*FACTORS, *(label for _, label, _ in CELL_COLUMNS), "decode timing"]
    rows = [[*(row[f] for f in FACTORS), *(_with_interval(row, name, fmt) for name, _, fmt in CELL_COLUMNS),
             row["timing"]] for _, row in cells.iterrows()]
    return pd.DataFrame(rows, columns=head)


def cells_markdown(cells: pd.DataFrame) -> str:
    return _markdown(cells_view(cells))


def attribution_view(attribution: pd.DataFrame) -> pd.DataFrame:
    """The attribution as shown: one row per (base corner, figure, share), the value with its interval."""
    rows = []
    for _, row in attribution.iterrows():
        interval = _interval_text(row["low"], row["high"], row.get("needs_prompts", 0), "{:+.3f}")
        value = f"{row['value']:+.3f}{interval}" if math.isfinite(row["value"]) else "not measured"
        share = SHARE_NAMES.get(row["share"], row["share"])
        rows.append([BASE_NAMES.get(row.get("base", "synthetic"), row.get("base")), row["figure"], share, value])
    return pd.DataFrame(rows, columns=["from", "figure", "share", "value [95% interval]"])


def attribution_markdown(attribution: pd.DataFrame) -> str:
    return NO_ATTRIBUTION if attribution.empty else _markdown(attribution_view(attribution))


def _markdown(view: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(view.columns) + " |", "|" + "---|" * len(view.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in view.itertuples(index=False)]
    return "\n".join(lines)


def settings_line(design: dict) -> str:
    """The two servers and the design's sizes, in one sentence."""
    settings, profiles, servers = design["settings"], design["profiles"], design["servers"]
    return (f"Plain: {profiles.get('plain') or servers['plain']}; speculative: "
            f"{profiles.get('speculative') or servers['speculative']}. {settings['prompts']} prompts per content; "
            f"fixed length {settings['fixed_tokens']} tokens (ignore_eos), natural length capped at "
            f"{settings['natural_cap']}; synthetic prompts of {settings['synthetic_input_tokens']} tokens"
            f"{MATCHED_NOTE if 'synthetic-matched' in settings['contents'] else ''}.")


def write_outputs(folder: Path, cells: pd.DataFrame, attribution: pd.DataFrame, design: dict) -> Path:
    """Write the tables and the figure; return the Markdown file."""
    cells.to_csv(folder / CELLS_FILE, index=False)
    attribution.to_csv(folder / ATTRIBUTION_FILE, index=False)
    text = "\n\n".join([
        f"# The synthetic-vs-GSM8K gap, by cause ({folder.name})", f"{settings_line(design)} Runs: `runs/`.",
        f"## {CELLS_HEADING}", cells_markdown(cells), f"## {ATTRIBUTION_HEADING}", attribution_markdown(attribution),
    ])
    path = folder / "gap.md"
    path.write_text(text + "\n", encoding="utf-8")
    if not cells.empty:
        plot_cells(cells, folder / FIGURE_FILE)
    return path


GREEDY_COLOR, SAMPLED_COLOR = "#1f77b4", "#ff7f0e"


def cell_bars(cells: pd.DataFrame, name: str) -> list[dict]:
    """One bar a cell for figure `name`: its value, the error bar's reach below and above it (to the
    interval's ends), blue for greedy and orange for sampled cells, hatched where the length is natural."""
    return [{"value": value, "below": value - low, "above": high - value,
             "color": GREEDY_COLOR if sampling == "greedy" else SAMPLED_COLOR, "hatch": "" if length == "fixed" else "//"}
            for value, low, high, sampling, length in zip(cells[name], cells[f"{name}_low"], cells[f"{name}_high"],
                                                          cells["sampling"], cells["length"])]


FIGURE_INCHES, FIGURE_DPI = (11, 7), 110  # 1,210 x 770 px: the report shows it at its own width


def cells_figure(cells: pd.DataFrame):
    """Speed-up and token-weighted accept length per cell, grouped by content, with intervals; a line
    at 1.0 on both (no speed-up; one token a round), each cell's label upright under its bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=FIGURE_INCHES, sharex=True)
    labels = [f"{r.content}\n{r.sampling}/{r.length}" for r in cells.itertuples()]
    x = range(len(cells))
    for ax, (name, title) in zip(axes, (("speedup", "decode speed-up (spec / plain)"),
                                        ("accept_length_token_weighted", "accept length (tokens per round)"))):
        for xi, bar in zip(x, cell_bars(cells, name)):
            ax.bar(xi, bar["value"], yerr=[[bar["below"]], [bar["above"]]], color=bar["color"], hatch=bar["hatch"],
                   alpha=0.85)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel(title)
    axes[-1].set_xticks(list(x), labels, rotation=90, fontsize=7)  # two dozen cells' labels side by side
    axes[0].set_title("blue: greedy, orange: published sampling; plain bar: fixed length, hatched: natural")
    fig.tight_layout()
    return fig


def plot_cells(cells: pd.DataFrame, out: Path) -> Path:
    """The cells' figure (`cells_figure`) as a PNG."""
    import matplotlib.pyplot as plt

    fig = cells_figure(cells)
    fig.savefig(out, dpi=FIGURE_DPI)
    plt.close(fig)
    return out
