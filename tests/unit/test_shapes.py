"""Runs grouped by the shape of their workload: what makes two shapes differ (and what does not),
the line that says why a group stands apart, the shape in words, and the group's baseline."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from harness.analysis import shapes
from harness.analysis.run import Run
from harness.analysis.shapes import ShapeGroup, first_measured, format_groups, shape_key, shape_text, why_apart

GREEDY = {"max_new_tokens": 8, "temperature": 0.0}


def run(workload: dict, run_id: str = "r") -> Run:
    return Run("/nowhere", {"run_id": run_id, "workload": workload, "options": {}})


def synthetic(**sampling) -> Run:
    return run({"name": "synthetic", "input_tokens": 64, "output_tokens": 8, "sampling": {**GREEDY, **sampling}})


def test_a_per_request_seed_is_a_draw_and_any_other_sampling_field_is_the_shape():
    assert shape_key(synthetic(seed=1)) == shape_key(synthetic(seed=2))
    assert shape_key(synthetic(top_p=0.9)) != shape_key(synthetic(top_p=0.95))
    assert shape_key(synthetic(max_new_tokens=16)) != shape_key(synthetic())  # a field sorting before "seed"


def test_why_apart_names_the_workload_or_the_sampling_fields_that_differ():
    gsm8k = run({"name": "gsm8k", "sampling": GREEDY})
    assert why_apart(synthetic(), gsm8k) == "different workload (gsm8k, baseline synthetic)"
    assert why_apart(gsm8k, synthetic()) == "different workload (synthetic, baseline gsm8k)"
    assert why_apart(synthetic(), synthetic(temperature=0.6)) == "different shape (sampling.temperature)"
    assert why_apart(synthetic(), synthetic(top_k=20)) == "different shape (sampling.top_k)"  # on one side only


def test_more_than_four_differences_are_cut_short():
    base = run({"name": "synthetic", "sampling": GREEDY})
    other = run({"name": "synthetic", "sampling": GREEDY, "a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6})
    assert why_apart(base, other) == "different shape (a, b, c, d...)"


def test_the_shape_in_words_says_greedy_sampled_exact_or_at_most():
    assert shape_text(synthetic()) == "synthetic: 64 in / 8 out, greedy"
    sampled = synthetic(temperature=0.6, top_p=0.95, top_k=29)
    assert shape_text(sampled) == "synthetic: 64 in / 8 out, T=0.6 top_p=0.95 top_k=29"
    natural = run({"name": "gsm8k", "sampling": {"max_new_tokens": 512, "temperature": 0.0}})
    assert shape_text(natural) == "gsm8k: 512 out max, greedy"
    assert shape_text(run({"name": "gsm8k"})).endswith(", sampling not recorded")


def test_a_run_that_measured_nothing_is_no_baseline_unless_none_did():
    empty = [SimpleNamespace(measured=pd.DataFrame()) for _ in range(3)]
    assert first_measured(empty) is empty[0]
    measured = SimpleNamespace(measured=pd.DataFrame({"x": [1]}))
    assert first_measured([*empty, measured]) is measured


def test_each_group_is_printed_under_its_shape_and_why_it_stands_apart(monkeypatch):
    monkeypatch.setattr(shapes, "format_comparison", lambda comparison: "TABLE")
    comparison = pd.DataFrame()
    groups = [ShapeGroup([synthetic()], synthetic(), comparison, ""),
              ShapeGroup([synthetic()], synthetic(temperature=0.6), comparison, "not compared with x: y")]
    text = format_groups(groups)
    first, second = text.split("\n\n== ")
    assert first == "== synthetic: 64 in / 8 out, greedy\n\nTABLE"
    assert second == "synthetic: 64 in / 8 out, T=0.6 top_p=None top_k=None\nnot compared with x: y\n\nTABLE"
