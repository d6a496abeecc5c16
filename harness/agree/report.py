"""The agreement run for people: a printed summary, a figure, and an HTML / Markdown report section.

Everything here reads the tables `harness.agree.run.write_tables` left in the run directory.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from harness.agree.run import KL_NOTE, TABLES
from harness.agree.tables import summary_value
from harness.records.rundir import load_record
from harness.report.markup import as_text, html_table, md_table, md_text
from harness.report.plots import new_figure, save

FIGURE = "agreement"
CAPTION = ("Top-1 agreement and top-k recall by frequency band of the forced token (left), top-1 agreement "
           "by the reference's top-1 margin (middle), distribution of the union KL (right)")


def is_agreement_run(run_dir: Path) -> bool:
    return load_record(run_dir).kind == "agreement"


def read_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(Path(run_dir) / file) for name, file in TABLES.items()}


def title(run_dir: Path) -> str:
    record = load_record(run_dir)
    ref, cand = record.servers["reference"], record.servers["candidate"]
    return (f"{record.run_id}: candidate {cand.engine} {cand.url} against reference "
            f"{ref.engine} {ref.url} ({record.agreement.source}, k={record.agreement.top_k})")


def headline(run_dir: Path) -> str:
    """Three lines: what was compared, and the agreement figures."""
    summary = read_tables(run_dir)["summary"]
    top1, low, high = (summary_value(summary, "top1_agreement", s) for s in ("mean", "ci95_low", "ci95_high"))
    return "\n".join([
        title(run_dir),
        f"positions {summary_value(summary, 'positions', 'value'):.0f} in {summary_value(summary, 'sequences', 'value'):.0f} "
        f"sequences; top-1 agreement {top1:.2%} (95% CI {low:.2%} - {high:.2%}); "
        f"top-k recall {summary_value(summary, 'topk_recall'):.2%}",
        f"union KL mean {summary_value(summary, 'kl_union_nats'):.3g} nats (p95 "
        f"{summary_value(summary, 'kl_union_nats', 'p95'):.3g}); largest |log-prob shift| of the forced token "
        f"{summary_value(summary, 'abs_target_logprob_shift', 'max'):.3g} nats",
    ])


def plot_agreement(run_dir: Path, out_dir: Path) -> list[Path]:
    """Three panels from bands.csv, by_margin.csv and positions.parquet."""
    tables = read_tables(run_dir)
    bands, margin = tables["bands"], tables["by_margin"]
    kl = pd.read_parquet(Path(run_dir) / "positions.parquet", columns=["kl_union_nats"])["kl_union_nats"]
    fig = new_figure(13, 4.2)
    left, middle, right = fig.subplots(1, 3)
    x = np.arange(len(bands))
    left.bar(x - 0.2, bands["top1_agreement"], 0.4, label="top-1 agreement")
    left.bar(x + 0.2, bands["topk_recall"], 0.4, label="top-k recall")
    left.set_xticks(x, [f"{b}\n({n} pos.)" for b, n in zip(bands["band"], bands["positions"])])
    left.set_ylim(0, 1.05)
    left.set_title("by frequency band of the forced token")
    left.legend(fontsize=8, loc="lower left")
    labels = [f"{lo:.2g}-{hi:.2g}" for lo, hi in zip(margin["margin_low"], margin["margin_high"])]
    middle.bar(np.arange(len(margin)), margin["top1_agreement"], color="#2ca02c")
    middle.set_xticks(np.arange(len(margin)), labels, fontsize=7)
    middle.set_ylim(0, 1.05)
    middle.set_xlabel("reference top-1 margin, nats (quantile bins)")
    middle.set_title("top-1 agreement by the reference's margin")
    right.hist(kl, bins=40, color="#9467bd")
    right.set_yscale("log")
    right.set_xlabel("union KL per position, nats")
    right.set_title("KL(reference || candidate), top-k union")
    fig.suptitle(title(run_dir), fontsize=9)
    return save(fig, out_dir, FIGURE)


def _views(run_dir: Path) -> list[tuple[str, pd.DataFrame]]:
    tables = read_tables(run_dir)
    return [("Summary", as_text(tables["summary"], "{:.4g}")), ("By frequency band", as_text(tables["bands"], "{:.4g}")),
            ("By the reference's top-1 margin", as_text(tables["by_margin"], "{:.4g}")),
            ("Largest shifts of the forced token's log-probability", as_text(tables["shifts"], "{:.4g}"))]


def section_html(run_dir: Path, figure_png: Path) -> str:
    import base64

    data = base64.b64encode(figure_png.read_bytes()).decode("ascii")
    parts = [f"<h2>Top-k agreement: {html.escape(title(run_dir))}</h2>", f"<p>{html.escape(KL_NOTE)}.</p>",
             f"<figure><img alt='{html.escape(CAPTION)}' src='data:image/png;base64,{data}'>"
             f"<figcaption>{html.escape(CAPTION)}</figcaption></figure>"]
    for heading, frame in _views(run_dir):
        parts += [f"<h3>{html.escape(heading)}</h3>", html_table(frame)]
    return "".join(parts)


def section_markdown(run_dir: Path, figure_link: str) -> str:
    parts = [f"## Top-k agreement: {md_text(title(run_dir))}", md_text(KL_NOTE) + ".",
             f"![{md_text(CAPTION)}]({figure_link})"]
    for heading, frame in _views(run_dir):
        parts += [f"### {md_text(heading)}", md_table(frame)]
    return "\n\n".join(parts)


def write_report(run_dir: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    """report.html (figure embedded) and report.md (figure linked from plots/) in `out_dir`
    (default: the run directory)."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir else run_dir
    png = plot_agreement(run_dir, out_dir / "plots")[0]
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>sparkbench agreement</title></head>"
            f"<body>{section_html(run_dir, png)}</body></html>\n")
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(page, encoding="utf-8")
    md_path.write_text(section_markdown(run_dir, f"plots/{png.name}") + "\n", encoding="utf-8")
    return html_path, md_path
