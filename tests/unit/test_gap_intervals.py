"""The gap's intervals and its length-matched content: the Shapley weights against a hand-computed
cube, prompts resampled jointly within a content and independently across contents, intervals
withheld below the prompts the coverage simulation found they need, and the matched prompts."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from harness.gap import intervals
from harness.gap.analysis import CellArrays, analyse_cells, attribute, design_statistic
from harness.gap.design import (
    CONTENTS,
    FACTORS,
    GSM8K,
    GSM8K_CORNER,
    MATCHED_CORNER,
    SYNTHETIC,
    SYNTHETIC_CORNER,
    SYNTHETIC_MATCHED,
    Cell,
    LengthMatchedWorkload,
    Lengths,
    cells,
)
from harness.gap.intervals import bootstrap_intervals, needed_prompts
from harness.gap.outputs import (
    GREEDY_COLOR,
    SAMPLED_COLOR,
    attribution_view,
    cell_bars,
    cells_figure,
    cells_view,
    plot_cells,
    settings_line,
)
from harness.gap.run import MANIFEST, GapSettings, cell_plan, content_plan, load_design, token_counter
from harness.spec import Prompt, SamplingParams
from tests.unit.agree_fakes import write_tokenizer

# A figure on the cube, hand-made with pairwise and three-way interactions: moved factors -> value.
CUBE = {(): 0, ("content",): 4, ("sampling",): 2, ("length",): 1, ("content", "sampling"): 3,
        ("content", "length"): 6, ("sampling", "length"): 5, ("content", "sampling", "length"): 9}
# By hand, each factor's marginal change over the six orders of moving the three, averaged:
# content: (4 + 4 + 1 + 4 + 5 + 4) / 6 = 22/6; sampling: (2 + 3 - 1 + 3 + 4 + 2) / 6 = 13/6;
# length: (1 + 6 + 6 + 3 + 1 + 2) / 6 = 19/6 (orders CSL, CLS, SCL, SLC, LCS, LSC, read per factor).
HAND_SHAPLEY = {"content": Fraction(22, 6), "sampling": Fraction(13, 6), "length": Fraction(19, 6)}


def _cube_value(levels):
    moved = tuple(f for i, f in enumerate(FACTORS) if levels[i] == GSM8K_CORNER[i])
    return np.array([float(CUBE[moved])])


def test_shapley_shares_match_the_hand_computed_cube_with_interactions():
    shares = attribute(_cube_value)
    assert sum(HAND_SHAPLEY.values()) == CUBE[tuple(FACTORS)]
    for factor, value in HAND_SHAPLEY.items():
        assert shares[f"shapley:{factor}"][0] == pytest.approx(float(value))
    assert shares["one_at_a_time:interaction"][0] == pytest.approx(9 - 4 - 2 - 1)


def test_the_hand_computed_shares_are_the_average_over_the_six_orders():
    """The hand figures above, checked by walking the orders (so a slip in them cannot pass)."""
    totals = dict.fromkeys(FACTORS, Fraction(0))
    for order in itertools.permutations(FACTORS):
        for k, factor in enumerate(order):
            before = tuple(f for f in FACTORS if f in order[:k])
            after = tuple(f for f in FACTORS if f in order[:k + 1])
            totals[factor] += Fraction(CUBE[after] - CUBE[before], 6)
    assert totals == HAND_SHAPLEY


def _arrays(rng: np.random.Generator, n: int) -> CellArrays:
    tokens = np.full(n, 63.0)
    rounds = tokens / rng.uniform(1.2, 3.5, n)
    return CellArrays(tokens, tokens * rng.uniform(0.008, 0.012, n), tokens, rounds * rng.uniform(0.02, 0.04, n),
                      tokens, rounds, tokens / rounds, "server")


def _design(n: int, seed: int = 0, contents=(SYNTHETIC, GSM8K)) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    levels = [c.levels for c in cells(contents)]
    return levels, [_arrays(rng, n) for _ in levels]


def test_a_contents_prompts_are_resampled_jointly_across_its_cells():
    """Published/fixed is greedy/fixed with every speculative decode twice as fast: resampled jointly,
    its change along sampling is the greedy cell's speed-up in every resample, interval and all."""
    levels, arrays = _design(8)
    greedy = levels.index(SYNTHETIC_CORNER)
    published = levels.index((SYNTHETIC, "published", "fixed"))
    arrays[published] = replace(arrays[greedy], spec_seconds=arrays[greedy].spec_seconds / 2)
    keys, sizes, statistic = design_statistic(levels, arrays)
    point, low, high = bootstrap_intervals(statistic, sizes, n_resamples=500)
    cell = keys.index(("cell", SYNTHETIC_CORNER, "speedup"))
    share = keys.index(("share", SYNTHETIC_CORNER, "speedup", "one_at_a_time:sampling"))
    assert (point[share], low[share], high[share]) == pytest.approx((point[cell], low[cell], high[cell]))


def test_contents_are_resampled_independently_of_each_other():
    """GSM8K's cells carry the synthetic cells' very numbers, prompt for prompt. Paired across contents,
    the content change would be 0 in every resample; independent, its interval has width."""
    levels, arrays = _design(8)
    by_levels = dict(zip(levels, arrays))
    arrays = [by_levels[(SYNTHETIC, *lv[1:])] for lv in levels]
    keys, sizes, statistic = design_statistic(levels, arrays)
    point, low, high = bootstrap_intervals(statistic, sizes, n_resamples=500)
    share = keys.index(("share", SYNTHETIC_CORNER, "speedup", "one_at_a_time:content"))
    assert point[share] == pytest.approx(0.0)
    assert high[share] - low[share] > 0.05


def test_the_statistic_indexes_each_cell_with_its_contents_positions():
    levels, arrays = _design(5)
    keys, sizes, statistic = design_statistic(levels, arrays)
    assert list(sizes) == [SYNTHETIC, GSM8K]
    values = statistic(np.array([0, 0, 0, 0, 0]), np.array([4, 4, 4, 4, 4]))
    for levels_, a in zip(levels, arrays):
        one = 0 if levels_[0] == SYNTHETIC else 4
        expected = (a.spec_tokens[one] / a.spec_seconds[one]) / (a.plain_tokens[one] / a.plain_seconds[one])
        assert values[keys.index(("cell", levels_, "speedup"))] == pytest.approx(expected)


class _Loaded(SimpleNamespace):
    pass


def _loaded(levels, arrays):
    frame = pd.DataFrame({"status": ["ok"], "completion_tokens": [64]})
    run = SimpleNamespace(derived=frame)
    return [_Loaded(levels=lv, arrays=a, plain=run, spec=run) for lv, a in zip(levels, arrays)]


def test_an_interval_is_withheld_below_the_prompts_its_kind_needs(monkeypatch):
    monkeypatch.setattr(intervals, "MIN_PROMPTS", {"speedup": 10, ("speedup", "shapley"): 4})
    table, shares = analyse_cells(_loaded(*_design(6)), n_resamples=200)
    assert table["speedup_needs_prompts"].eq(10).all() and table["speedup_low"].isna().all()
    assert table["accept_length_token_weighted_needs_prompts"].eq(intervals.LARGEST_SIMULATED + 1).all()
    shapley = shares[(shares["figure"] == "speedup") & shares["share"].str.startswith("shapley")]
    assert shapley["needs_prompts"].eq(0).all() and shapley["low"].notna().all()
    assert "(no interval: needs 10 prompts per content)" in cells_view(table).iloc[0]["decode speed-up"]
    shown = attribution_view(shares)["value [95% interval]"]
    assert shown.str.contains(r"\[").sum() == len(shapley)


def test_an_interval_is_shown_from_exactly_the_prompts_its_kind_needs(monkeypatch):
    """6 prompts a content: a cell figure that needs 4 and a share that needs exactly 6 both show
    their intervals and need nothing more."""
    monkeypatch.setattr(intervals, "MIN_PROMPTS", {"speedup": 4, ("speedup", "shapley"): 6})
    table, shares = analyse_cells(_loaded(*_design(6)), n_resamples=200)
    assert table["speedup_needs_prompts"].eq(0).all() and table["speedup_low"].notna().all()
    shapley = shares[(shares["figure"] == "speedup") & shares["share"].str.startswith("shapley")]
    assert shapley["needs_prompts"].eq(0).all() and shapley["low"].notna().all()


def test_the_prompts_each_kind_needs_are_what_the_coverage_simulation_measured():
    """docs/gap.md's coverage table, read back: for every kind, the fewest prompts from which every
    simulated size covers at least 90% is its last column and `MIN_PROMPTS`; the largest size
    simulated is `LARGEST_SIMULATED`."""
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[2] / "docs" / "gap.md").read_text(encoding="utf-8").splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| interval (figure / share kind) |"))
    sizes = [int(cell.split()[0]) for cell in lines[header].strip("|").split("|")[2:-1]]
    measured = {}
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        kind, _, *coverage, stated = [cell.strip() for cell in line.strip("|").split("|")]
        figure, _, share = kind.partition(" / ")
        covered = [float(c) >= 0.90 for c in coverage]
        fewest = next(size for i, size in enumerate(sizes) if all(covered[i:]))
        assert int(stated) == fewest, kind
        measured[(figure, share) if share else figure] = fewest
    assert measured == intervals.MIN_PROMPTS and max(sizes) == intervals.LARGEST_SIMULATED


def test_a_content_of_two_prompts_has_an_interval_and_of_one_none():
    values = np.array([1.0, 3.0])

    def mean(positions: np.ndarray, axis: int = -1) -> np.ndarray:
        return values[positions].mean(axis=-1)[None]

    assert intervals.bootstrap_intervals(mean, {"synthetic": 2}, n_resamples=500) == ([2.0], [1.0], [3.0])
    point, low, high = intervals.bootstrap_intervals(mean, {"synthetic": 1}, n_resamples=500)
    assert point.tolist() == [1.0] and np.isnan(low).all() and np.isnan(high).all()


def test_needed_prompts_reads_the_table_by_share_kind(monkeypatch):
    monkeypatch.setattr(intervals, "MIN_PROMPTS", {("speedup", "one_at_a_time"): 24, ("speedup", "interaction"): 48})
    assert needed_prompts("speedup", "one_at_a_time:length") == 24
    assert needed_prompts("speedup", "one_at_a_time:interaction") == 48
    assert needed_prompts("speedup", "delta") == intervals.LARGEST_SIMULATED + 1


def test_both_base_corners_are_attributed_when_their_cubes_were_run():
    levels, arrays = _design(4, contents=(SYNTHETIC, SYNTHETIC_MATCHED, GSM8K))
    keys, _, _ = design_statistic(levels, arrays)
    assert {k[1] for k in keys if k[0] == "share"} == {SYNTHETIC_CORNER, MATCHED_CORNER}
    levels, arrays = _design(4, contents=(SYNTHETIC_MATCHED, GSM8K))
    keys, _, _ = design_statistic(levels, arrays)
    assert {k[1] for k in keys if k[0] == "share"} == {MATCHED_CORNER}


class _Reference:
    name = "gsm8k"

    def prompts(self):
        return [Prompt(f"gsm8k-{i}", SamplingParams(max_new_tokens=8), text="x" * length)
                for i, length in enumerate((40, 17, 33))]


class _Synthetic:
    """Stands in for the synthetic workload: records the trace it is asked to replay."""

    name = "synthetic"

    def replaying(self, trace):
        self.trace = trace
        return self

    def spec(self):
        return {"name": self.name, "input_tokens": None}

    def prompts(self):
        return [Prompt(f"syn-{i}", SamplingParams(max_new_tokens=8), input_ids=(1,) * n)
                for i, n in enumerate(self.trace.columns["input_tokens"])]


def test_the_matched_content_takes_the_reference_prompts_lengths_one_by_one():
    workload = LengthMatchedWorkload(_Synthetic(), _Reference(), count=lambda p: len(p.text))
    assert [len(p.input_ids) for p in workload.prompts()] == [40, 17, 33]
    assert workload.spec()["length_matched_to"] == "gsm8k"


def test_the_matched_content_is_in_the_design_with_its_four_cells():
    assert SYNTHETIC_MATCHED in CONTENTS and MATCHED_CORNER[0] == SYNTHETIC_MATCHED
    assert {c.levels for c in cells((SYNTHETIC_MATCHED,))} >= {MATCHED_CORNER}


def test_a_matched_plan_sends_random_prompts_as_long_as_the_gsm8k_prompts(tmp_path):
    folder = write_tokenizer(tmp_path / "tok")
    settings = GapSettings((SYNTHETIC_MATCHED, GSM8K), 4, Lengths(8, 16), synthetic_input_tokens=32, tokenizer=folder)
    target = SimpleNamespace(reduced=True, model_dir=None)
    matched = content_plan(SYNTHETIC_MATCHED, settings, target).make(EngineFacts()).prompts()
    reference = content_plan(GSM8K, settings, target).make(EngineFacts()).prompts()
    count = token_counter(folder)
    lengths = [count(p) for p in reference]
    assert len(set(lengths)) > 1 and [len(p.input_ids) for p in matched] == lengths
    assert all(p.text is None for p in matched)
    cell = Cell(SYNTHETIC_MATCHED, "published", "natural")
    sent = cell_plan(cell, settings, target).make(EngineFacts())
    assert [len(p.input_ids) for p in sent.prompts()] == lengths
    assert sent.spec()["input_tokens_each"] == lengths and sent.spec()["gap_cell"] == cell.to_dict()


def test_the_settings_line_names_the_matched_content_where_the_design_has_it():
    settings = {"contents": [SYNTHETIC, GSM8K], "prompts": 24, "fixed_tokens": 64, "natural_cap": 192,
                "synthetic_input_tokens": 256}
    design = {"settings": settings, "profiles": {}, "servers": {"plain": "a", "speculative": "b"}}
    assert "synthetic-matched" not in settings_line(design)
    settings["contents"].insert(1, SYNTHETIC_MATCHED)
    assert "synthetic-matched prompts as long as the GSM8K prompts, one by one" in settings_line(design)


def test_every_printed_kind_of_interval_has_its_measured_prompt_count():
    from harness.gap.analysis import FIGURES, SHARES

    kinds = {*FIGURES, *((f, intervals.share_kind(s)) for f in FIGURES for s in SHARES)}
    assert kinds == set(intervals.MIN_PROMPTS)
    assert all(6 < n <= intervals.LARGEST_SIMULATED for n in intervals.MIN_PROMPTS.values())


def test_a_design_folder_reads_back_or_is_refused_in_one_line(tmp_path):
    (tmp_path / MANIFEST).write_text(json.dumps({"settings": {"prompts": 4}, "cells": []}))
    assert load_design(tmp_path) == {"settings": {"prompts": 4}, "cells": []}
    with pytest.raises(SparkbenchError, match="is not a gap design folder"):
        load_design(tmp_path / "elsewhere")


def test_a_prompt_given_as_ids_is_counted_by_its_ids_and_a_count_needs_a_tokenizer(tmp_path):
    count = token_counter(write_tokenizer(tmp_path / "tok"))
    assert count(Prompt("p", SamplingParams(max_new_tokens=8), input_ids=(5,) * 7)) == 7
    assert count(Prompt("q", SamplingParams(max_new_tokens=8), text="What is 2 + 2?")) > 0
    with pytest.raises(SparkbenchError, match="give --tokenizer DIR"):
        token_counter(None)


def test_each_cells_bar_reaches_its_interval_and_says_its_sampling_and_length():
    cells_table = pd.DataFrame({"sampling": ["greedy", "published"], "length": ["fixed", "natural"],
                                "speedup": [2.0, 1.25], "speedup_low": [1.5, 1.0], "speedup_high": [4.5, 1.5]})
    assert cell_bars(cells_table, "speedup") == [
        {"value": 2.0, "below": 0.5, "above": 2.5, "color": GREEDY_COLOR, "hatch": ""},
        {"value": 1.25, "below": 0.25, "above": 0.25, "color": SAMPLED_COLOR, "hatch": "//"}]


def test_the_cells_figure_marks_parity_on_both_panels_and_labels_every_cell_upright(tmp_path):
    cells_table = pd.DataFrame({"content": ["gsm8k", "synthetic"], "sampling": ["greedy", "published"],
                                "length": ["fixed", "natural"], "speedup": [2.0, 1.25], "speedup_low": [1.5, 1.0],
                                "speedup_high": [4.5, 1.5], "accept_length_token_weighted": [3.0, 1.5],
                                "accept_length_token_weighted_low": [2.5, 1.2],
                                "accept_length_token_weighted_high": [3.5, 1.8]})
    fig = cells_figure(cells_table)
    speedup, accept = fig.axes
    assert [bar.get_height() for bar in speedup.patches] == [2.0, 1.25]  # a bar a cell, in the table's order
    assert [bar.get_height() for bar in accept.patches] == [3.0, 1.5]
    for panel in fig.axes:  # no speed-up, one token a round: the line a bar is read against
        assert [list(line.get_ydata()) for line in panel.get_lines()] == [[1.0, 1.0]]
    labels = fig.axes[-1].get_xticklabels()
    assert [label.get_text() for label in labels] == ["gsm8k\ngreedy/fixed", "synthetic\npublished/natural"]
    assert {(label.get_rotation(), label.get_fontsize()) for label in labels} == {(90.0, 7.0)}
    png = plot_cells(cells_table, tmp_path / "cells.png").read_bytes()
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1210, 770)  # IHDR
