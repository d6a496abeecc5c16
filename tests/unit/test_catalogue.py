"""The metric catalogue is the one list: units, headline view, comparison, nightly gates and the
metrics page all follow it."""

from __future__ import annotations

import re
from pathlib import Path

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
