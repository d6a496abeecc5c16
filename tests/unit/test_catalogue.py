"""The metric catalogue is the one list: units, headline view, comparison, nightly gates and the
metrics page all follow it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness.analysis.tables import HEADLINE
from harness.metrics.catalogue import (
    ACCURACY,
    CATALOGUE,
    DISTRIBUTION,
    NEITHER,
    RUN,
    compared_stats,
    default_thresholds,
    gated,
)
from harness.metrics.energy import DOMAINS
from harness.metrics.schema import DISTRIBUTION_UNITS, RUN_UNITS, STAT_UNITS
from harness.nightly.config import DEFAULT_THRESHOLDS
from harness.nightly.gate import ACCURACIES, GATED

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def documented_names() -> set[str]:
    """Names in backquotes on the metrics page; `{domain}_x` stands for every energy domain's (lm-eval's
    names hold `,` and `-`)."""
    names = set(re.findall(r"`([a-z0-9_{},-]+)`", DOCS.read_text(encoding="utf-8")))
    expanded = {name.replace("{domain}", domain) for name in names for domain in DOMAINS}
    return names | expanded


def test_docs_list_every_catalogue_metric():
    assert set(CATALOGUE) - documented_names() == set()


def test_summary_units_come_from_the_catalogue():
    assert DISTRIBUTION_UNITS == {n: m.unit for n, m in CATALOGUE.items() if m.kind == DISTRIBUTION}
    assert RUN_UNITS == {n: m.unit for n, m in CATALOGUE.items() if m.kind == RUN}


def test_headline_and_comparison_name_catalogue_stats():
    distribution_stats = {"n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", *STAT_UNITS}
    for metric, stats in [*HEADLINE, *[(m, [s]) for m, s in compared_stats()]]:
        kind = CATALOGUE[metric].kind
        allowed = distribution_stats if kind == DISTRIBUTION else {"mean", "ci95_low", "ci95_high", "value"}
        assert set(stats) <= allowed, metric


def test_nightly_gates_follow_the_catalogue():
    assert [(m, s) for m, s, _ in GATED] + ACCURACIES == [(m.name, m.gate_stat) for m in gated()]
    assert DEFAULT_THRESHOLDS == default_thresholds()
    assert all(m.direction != NEITHER for m in gated())
    assert [m.name for m in gated() if m.kind == ACCURACY] == ["gsm8k_accuracy_strict"]
    assert CATALOGUE["e2e_ms"].gate_stat == "p95"


TIMES = {"ms", "s", "ms/token"}
RATES = {"tok/s", "req/s", "tokens/round", "tokens/step"}
NO_BETTER_SIDE = {"requests", "requests_ok", "offered_rate_rps", "run_span_s"}
BARS = {"break_even_tokens_per_round"}  # the accept length a speculative run must reach: lower is better


def test_which_way_is_better_follows_the_unit():
    """A time is never better higher, a rate never better lower (compare's better/worse and the
    nightly's side read the sign); what the run was given has no better side."""
    times = [m for m in CATALOGUE.values() if m.unit in TIMES]
    rates = [m for m in CATALOGUE.values() if m.unit in RATES and m.name not in BARS]
    assert len(times) > 10 and len(rates) > 10
    assert [m.name for m in times if m.direction > 0] == []
    assert [m.name for m in rates if m.direction < 0] == []
    assert {m.name: m.direction for m in CATALOGUE.values() if m.name in NO_BETTER_SIDE} == dict.fromkeys(
        NO_BETTER_SIDE, NEITHER)
    assert CATALOGUE["tpot_ms"].direction < 0 < CATALOGUE["decode_throughput_aggregate"].direction
    assert all(CATALOGUE[name].direction < 0 for name in BARS)


def documented_gates() -> dict[str, tuple[str, float]]:
    """The metrics page's table of default nightly gates: metric -> (stat, threshold)."""
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (\w+) \| ([\d.]+) \|$", DOCS.read_text(encoding="utf-8"), re.M)
    return {name: (stat, float(threshold)) for name, stat, threshold in rows}


def test_the_default_gates_are_the_documented_ones():
    assert {m.name: (m.gate_stat, m.gate) for m in gated()} == documented_gates()


def test_the_headline_shows_the_documented_energy_roofline_and_lm_eval_figures():
    shown = {metric for metric, _ in HEADLINE}
    for domain in DOMAINS:
        energy = {m.name for m in CATALOGUE.values() if m.name.startswith(f"{domain}_")}
        assert energy & shown == {f"{domain}_{figure}" for figure in (
            "energy_per_output_token_j", "output_tokens_per_j", "power_mean_w", "power_peak_w")}
    roofline = {m.name for m in CATALOGUE.values() if m.name.startswith("roofline_")}
    assert roofline & shown == {"roofline_bytes_per_step", "roofline_achieved_gbps", "roofline_fraction_of_peak"}
    assert [(m, s) for m, s in HEADLINE if m.startswith("lm_eval_")] == [
        ("lm_eval_gsm8k_exact_match,strict-match", ["mean", "ci95_low", "ci95_high"])]


def test_a_catalogue_entry_cannot_be_changed_by_a_reader():
    """Every summary, comparison and gate reads the same rows: a reader must not change them."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        CATALOGUE["tpot_ms"].gate = 1.0
