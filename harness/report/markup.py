"""Tables and text as escaped HTML and Markdown: every string that comes from a run (model
output, server strings, workload spec, labels) goes through html.escape here, so a model output
holding `<script>` shows as text and never runs, in either file."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")
# C0 controls but tab and line breaks, DEL and C1: a model's ESC sequences would recolour or
# rewrite the terminal of whoever `cat`s the report, and HTML has no use for them.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(page: str) -> str:
    """`page` without control characters (CONTROL_CHARACTERS): how every report page is written."""
    return CONTROL_CHARACTERS.sub("", page)


def as_text(frame: pd.DataFrame, number: str) -> pd.DataFrame:
    """Every cell as a string: floats through the `number` format, missing values empty."""
    def cell(v: object) -> str:
        return "" if pd.isna(v) else (number.format(v) if isinstance(v, float) else str(v))
    return frame.apply(lambda column: column.map(cell))


def html_table(frame: pd.DataFrame, pre_columns: Sequence[str] = ()) -> str:
    """A table with every header and cell escaped; `pre_columns` keep their line breaks."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        cells = [f"<td><pre>{html.escape(str(v))}</pre></td>" if c in pre_columns else f"<td>{html.escape(str(v))}</td>"
                 for c, v in row.items()]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def md_text(value: object) -> str:
    """A string safe in a Markdown table cell: HTML-escaped, Markdown punctuation backslashed,
    line breaks as spaces."""
    text = html.escape(str(value), quote=False).replace("\r", " ").replace("\n", " ")
    return MD_SPECIAL.sub(r"\\\1", text)


def md_table(frame: pd.DataFrame, cell: Callable[[object], str] = md_text) -> str:
    """A Markdown table; `cell` writes each cell (default: md_text)."""
    lines = ["| " + " | ".join(md_text(c) for c in frame.columns) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def embedded_figure(png: Path, caption: str) -> str:
    """A PNG as an HTML figure carrying its own bytes (base64), its caption escaped: a page that
    needs no file beside it."""
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def section_html(title: str, legend: str, blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    """A report section of titled tables under one legend, as HTML (nothing when there are no tables)."""
    if not blocks:
        return []
    parts = [f"<h2>{html.escape(title)}</h2>", f"<p class='legend'>{html.escape(legend)}</p>"]
    for heading, table in blocks:
        parts += [f"<h3>{html.escape(heading)}</h3>", html_table(table)]
    return parts


def section_markdown(title: str, legend: str, blocks: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    """The same section as Markdown."""
    if not blocks:
        return []
    parts = [f"## {md_text(title)}", md_text(legend)]
    for heading, table in blocks:
        parts += [f"### {md_text(heading)}", md_table(table)]
    return parts
