"""`sparkbench report` of a gap design folder: fake designs of made-up runs (no server)."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from harness.cli.results import report
from harness.errors import SparkbenchError
from harness.gap.design import cells
from harness.gap.outputs import CELLS_HEADING, NO_ATTRIBUTION, cells_markdown, write_outputs
from harness.gap.report import gap_report
from harness.records.rundir import SCALE_LABEL
from tests.unit.test_report import SYNTHETIC, synthetic_records, write_run

CORNER_CONTENTS = ("synthetic", "gsm8k")
FAILED_CELL = ("specbench:qa", "greedy", "fixed")
ERROR = "server <b>died</b>"


def write_design(folder: Path, contents: tuple[str, ...], entries: list[dict]) -> Path:
    """gap.json as `run_design` leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"settings": {"contents": list(contents), "prompts": 6, "fixed_tokens": 8, "natural_cap": 16,
                           "synthetic_input_tokens": 64, "seed": 0},
              "servers": {"plain": "http://127.0.0.1:1", "speculative": "http://127.0.0.1:2"},
              "profiles": {"plain": None, "speculative": None}, "cells": entries}
    (folder / "gap.json").write_text(json.dumps(record))
    return folder


@pytest.fixture(scope="module")
def design_with_runs(tmp_path_factory) -> Path:
    """The corner cube measured (each cell's speculative server a little faster than the last), one
    Spec-Bench cell whose speculative run failed, and that content's other cells never run."""
    folder = tmp_path_factory.mktemp("gap") / "gap-20260101T000000Z"
    entries = []
    for i, cell in enumerate(cells(CORNER_CONTENTS)):
        names = {"plain": f"20260101T00{i:02d}00Z-plain", "speculative": f"20260101T00{i:02d}30Z-spec"}
        write_run(folder / "runs", names["plain"], synthetic_records(10.0), SYNTHETIC)
        write_run(folder / "runs", names["speculative"], synthetic_records(9.0 - 0.5 * i, spec=True), SYNTHETIC)
        entries.append({**cell.to_dict(), "runs": names, "errors": {}})
    plain_only = "20260101T010000Z-plain"
    write_run(folder / "runs", plain_only, synthetic_records(10.0), SYNTHETIC)
    entries.append({**dict(zip(("content", "sampling", "length"), FAILED_CELL)), "runs": {"plain": plain_only},
                    "errors": {"speculative": ERROR}})
    return write_design(folder, (*CORNER_CONTENTS, "specbench:qa"), entries)


@pytest.fixture(scope="module")
def computed_report(design_with_runs) -> tuple[str, str]:
    html_path, md_path = gap_report(design_with_runs)
    assert (html_path.parent, md_path.parent) == (design_with_runs, design_with_runs)
    return html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")


def test_a_folder_of_runs_without_analysis_files_gets_them_computed_and_written(design_with_runs, computed_report):
    measured = pd.read_csv(design_with_runs / "gap_cells.csv")
    assert len(measured) == 8 and (design_with_runs / "gap.png").is_file()
    shares = set(pd.read_csv(design_with_runs / "gap_attribution.csv")["share"])
    assert {"delta", "one_at_a_time:content", "one_at_a_time:interaction", "shapley:length"} <= shares


def test_the_report_shows_both_tables_and_embeds_the_figure(design_with_runs, computed_report):
    html, md = computed_report
    assert "Plain: http://127.0.0.1:1; speculative: http://127.0.0.1:2. 6 prompts per content" in html
    for text in (html, md):
        assert CELLS_HEADING in text
        assert "shapley:content" in text and "one_at_a_time:interaction" in text
    assert "total change, synthetic corner -&gt; GSM8K corner" in html
    assert "total change, synthetic corner -> GSM8K corner" in md
    png = (design_with_runs / "gap.png").read_bytes()
    assert f"src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'" in html
    assert "](gap.png)" in md


def test_every_planned_cell_has_a_row_and_an_unmeasured_one_says_why(computed_report):
    html, md = computed_report
    table = md.split("## Cells")[1].split("##")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 12
    qa_rows = [row for row in rows if row.startswith("| specbench:qa ")]
    assert len(qa_rows) == 4 and all(row.count("not measured") == 6 for row in qa_rows)
    assert "specbench:qa/greedy/fixed: speculative run: server &lt;b&gt;died&lt;/b&gt;" in html
    assert "specbench:qa/published/natural: not run" in html
    assert "<b>died" not in html
    assert "### Not measured" in md and "- specbench:qa/published/natural: not run" in md
    assert SCALE_LABEL not in md  # runs at the configured scale carry no reduced-scale label


def test_a_designs_stored_tables_are_shown_as_stored_with_a_missing_figure_as_not_measured(tmp_path):
    folder = write_design(tmp_path / "gap-stored", ("synthetic",), [])
    measured = pd.DataFrame([{"content": "synthetic", "sampling": "greedy", "length": "fixed", "speedup": math.nan,
                              "speedup_low": math.nan, "speedup_high": math.nan,
                              "accept_length_token_weighted": 2.5, "accept_length_token_weighted_low": 2.0,
                              "accept_length_token_weighted_high": 3.0, "timing": "server"}])
    attribution = pd.DataFrame(columns=["figure", "share", "value", "low", "high"])
    write_outputs(folder, measured, attribution, json.loads((folder / "gap.json").read_text()))
    html_path, md_path = gap_report(folder)
    html, md = html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")
    stored_row = cells_markdown(measured).splitlines()[2]
    assert stored_row.startswith("| synthetic | greedy | fixed | not measured | 2.50 [2.00, 3.00] |")
    assert stored_row in md
    assert "<td>not measured</td><td>2.50 [2.00, 3.00]</td>" in html
    assert NO_ATTRIBUTION in html and NO_ATTRIBUTION in md
    assert "data:image/png;base64," in html


def test_report_writes_a_gap_folders_report_inside_it_and_refuses_it_beside_runs(design_with_runs, tmp_path):
    report(runs=[design_with_runs], out=tmp_path / "out")
    assert (design_with_runs / "report.html").is_file() and not (tmp_path / "out").exists()
    bench = write_run(tmp_path / "results", "20260101T020000Z-bench", synthetic_records(10.0), SYNTHETIC)
    with pytest.raises(SparkbenchError, match="gap design folder .* has its own report") as refused:
        report(runs=[design_with_runs, bench], out=tmp_path / "out")
    assert "\n" not in str(refused.value)
