"""Results by category: the per-category table, the paired speed-ups, and the report's section and
figures, on made-up runs whose answers are known (a speculative run twice as fast in one task)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from harness.analysis.categories import OVERALL, category_speedups, category_table
from harness.analysis.run import Run
from harness.analysis.shapes import compare_by_shape
from harness.report.category_section import category_blocks, format_categories
from harness.report.report import build_report
from tests.unit.conftest import build_record
from tests.unit.test_report import SYNTHETIC, synthetic_records, write_run

SPEC = {"name": "specbench", "categories": ["qa", "rag"], "per_task": 2}
TASKS = ("qa", "qa", "rag", "rag")


def _records(step_ms: dict[str, float], speculative: bool) -> list:
    """One record per question of TASKS: 9 tokens after a 10 ms prefill, chunks `step_ms[task]` apart;
    a speculative one brings 4 tokens a chunk (matching draft) and reports its histogram."""
    records = []
    for seq, task in enumerate(TASKS):
        sizes = [1, 4, 4] if speculative else [1] * 9
        chunks = [(10.0 + step_ms[task] * i, size) for i, size in enumerate(sizes)]
        meta = {"spec_verify_ct": 2, "spec_accept_length": 4.5, "spec_num_proposed_drafts": 6,
                "spec_correct_drafts_histogram": [0, 0, 0, 2]} if speculative else None
        record = build_record(chunks=chunks, seq=seq, meta=meta)
        records.append(dataclasses.replace(record, workload="specbench", prompt_id=f"specbench-{seq}",
                                           item_json=json.dumps({"category": task})))
    return records


@pytest.fixture
def runs(tmp_path):
    base = write_run(tmp_path, "20260101T000000Z-plain", _records({"qa": 10.0, "rag": 10.0}, False), SPEC)
    cand = write_run(tmp_path, "20260101T000100Z-spec", _records({"qa": 10.0, "rag": 40.0}, True), SPEC)
    return Run.load(base), Run.load(cand)


def test_the_table_holds_each_categorys_figures_and_the_overall_ones(runs):
    table = category_table(runs[1]).set_index(["category", "metric"])["value"]
    assert list(dict.fromkeys(category_table(runs[1])["category"])) == ["qa", "rag", OVERALL]
    assert table[("qa", "requests_ok")] == 2 and table[(OVERALL, "requests_ok")] == 4
    assert table[("rag", "accept_length_token_weighted")] == 4.5
    assert table[("rag", "accept_length_histogram")] == 4.0
    # qa: 8 decode tokens over 2 chunks of 10 ms plus the 1 ms to [DONE].
    assert table[("qa", "decode_throughput_aggregate")] == pytest.approx(8 / 0.021)
    assert math.isnan(category_table(runs[0]).set_index(["category", "metric"])["value"][("qa", "accept_length_histogram")])


def test_speedups_per_category_are_paired_and_both_ways(runs):
    speedups = category_speedups(*runs).set_index(["category", "metric"])
    # qa: the plain run needs 10 + 80 + 1 ms for 9 tokens, the speculative 10 + 20 + 1 ms.
    qa = speedups.loc[("qa", "speedup_mean_of_requests")]
    assert qa["value"] == pytest.approx(91 / 31) and qa["n"] == 2
    assert qa["ci95_low"] == pytest.approx(91 / 31) == qa["ci95_high"]  # identical requests: no spread
    qa_pooled = speedups.loc[("qa", "speedup_aggregate")]
    assert qa_pooled["ci95_low"] == pytest.approx(91 / 31) == qa_pooled["ci95_high"]
    rag = speedups.loc[("rag", "speedup_aggregate")]
    assert rag["value"] == pytest.approx(91 / 91)
    overall = speedups.loc[(OVERALL, "speedup_aggregate")]
    assert overall["value"] == pytest.approx((36 / 0.244) / (36 / 0.364))
    assert overall["ci95_low"] <= overall["value"] <= overall["ci95_high"]


def test_runs_of_other_questions_get_no_speedup(runs, tmp_path):
    other = write_run(tmp_path, "20260101T000200Z-other", _records({"qa": 5.0, "rag": 5.0}, True),
                      SPEC | {"categories": ["qa"]})
    assert category_speedups(runs[0], Run.load(other)).empty


def test_a_workload_without_categories_is_one_named_after_it(tmp_path):
    records = [dataclasses.replace(r, item_json="{}") for r in _records({"qa": 10.0, "rag": 10.0}, False)]
    run = Run.load(write_run(tmp_path, "20260101T000300Z-synthetic", records, {"name": "synthetic"}))
    assert set(category_table(run)["category"]) == {"synthetic"}


def test_a_synthetic_pair_stands_beside_the_tasks_under_its_own_name(tmp_path):
    base = Run.load(write_run(tmp_path, "20260101T000400Z-b", synthetic_records(10.0), SYNTHETIC))
    cand = Run.load(write_run(tmp_path, "20260101T000500Z-c", synthetic_records(8.0, spec=True), SYNTHETIC))
    speedups = category_speedups(base, cand)
    assert set(speedups["category"]) == {"synthetic"}
    assert speedups.set_index("metric").loc["speedup_aggregate", "value"] > 1


def test_the_report_shows_the_speedup_table_and_the_position_figures(runs, tmp_path):
    html_path, md_path = build_report(list(runs), tmp_path / "report")
    page = html_path.read_text()
    assert "By category" in page and "speed-up per category against" in page
    for figure in ("task_speedup", "acceptance_by_position", "accept_length_along_output"):
        assert list((tmp_path / "report" / "plots").rglob(f"{figure}.png")), figure
    assert "speed-up (Spec-Bench: mean request tok/s)" in md_path.read_text()
    text = format_categories(category_blocks(compare_by_shape(list(runs))))
    assert "2.94x" in text


def test_the_summary_rows_of_acceptance_say_where_they_came_from(runs):
    summary = runs[1].summary.set_index(["metric", "stat"])["value"]
    assert summary[("acceptance_at_position", "position_3")] == 1.0
    assert runs[1].histogram.source.startswith("per request")
    plain = runs[0].summary
    assert plain[plain["metric"] == "accept_length_histogram"]["value"].isna().all()
    assert runs[0].histogram.source == "not exported"


def test_the_speedup_counts_the_pairs_whose_greedy_outputs_differ(runs, tmp_path):
    records = _records({"qa": 10.0, "rag": 40.0}, True)
    records[3] = dataclasses.replace(records[3], output_text="another answer")
    records[0] = dataclasses.replace(records[0], output_text="~ sorts after the answer it replaces")
    cand = Run.load(write_run(tmp_path, "20260101T000600Z-spec", records, SPEC))
    differ = category_speedups(runs[0], cand).groupby("category", sort=False)["outputs_differ"].first()
    assert differ.to_dict() == {"qa": 1, "rag": 1, OVERALL: 2}
    text = format_categories(category_blocks(compare_by_shape([runs[0], cand])))
    assert "outputs differ" in text


def test_a_specbench_run_prints_its_table_per_task(runs, monkeypatch):
    from typer.testing import CliRunner

    import harness.session
    from harness.cli.app import app

    monkeypatch.setattr(harness.session, "run_repeated", lambda request: [runs[1]])
    done = CliRunner().invoke(app, ["run", "specbench", "--server", "http://127.0.0.1:9"])
    assert done.exit_code == 0, done.output
    assert f"{runs[1].caption}: figures per category" in done.output
    assert "rag" in done.output and "speed-ups per category against a plain run: sparkbench compare" in done.output


def test_a_categorys_means_are_over_its_own_requests(runs):
    table = category_table(runs[1]).set_index(["category", "metric"])["value"]
    measured = runs[1].measured
    for name, rows in (("qa", measured.iloc[:2]), ("rag", measured.iloc[2:])):
        assert table[(name, "tpot_ms")] == pytest.approx(rows["tpot_ms"].mean())
    assert table[("qa", "tpot_ms")] != pytest.approx(table[("rag", "tpot_ms")])


def test_category_names_that_sort_before_overall_pair_their_own_requests(runs, tmp_path):
    """The same runs with the tasks renamed `coding` and `math` ("overall" sorts after both)."""
    renamed = {"qa": "coding", "rag": "math"}

    def rename(run: Run, run_id: str) -> Run:
        records = _records({"qa": 10.0, "rag": 10.0 if run is runs[0] else 40.0}, run is runs[1])
        records = [dataclasses.replace(r, item_json=json.dumps({"category": renamed[json.loads(r.item_json)["category"]]}))
                   for r in records]
        return Run.load(write_run(tmp_path, run_id, records, {**SPEC, "categories": list(renamed.values())}))

    base, cand = rename(runs[0], "20260101T000700Z-plain"), rename(runs[1], "20260101T000800Z-spec")
    ours = category_speedups(base, cand).set_index(["category", "metric"])["value"]
    theirs = category_speedups(*runs).set_index(["category", "metric"])["value"]
    for old, new in renamed.items():
        assert ours[(new, "speedup_aggregate")] == pytest.approx(theirs[(old, "speedup_aggregate")])
