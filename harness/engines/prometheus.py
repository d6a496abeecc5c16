"""Prometheus text from a server's `GET /metrics`, read with `prometheus_client`'s parser.

Counters are running totals since the server started, so a run's own numbers are the difference
between a scrape before and a scrape after it (`counter_delta`). Nothing here is a per-request
fact: these totals include every request the server handled in between, warm-up included.
The same parsing serves the scrapes taken during a run (`harness.telemetry.server`), which keep
only the series an engine adapter names (`wanted`: a cheap filter before the parser).
"""

from __future__ import annotations

from collections.abc import Collection

import httpx
from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, frozenset[tuple[str, str]]]

SPEC_COUNTER_PREFIX = "vllm:spec_decode_"
# The speculative counters by short name, after the engine's prefix (`vllm:`; llama.cpp, which
# uses the same names, `llamacpp:`), with the `_total` suffix that the text exposition adds.
SPEC_COUNTERS = {
    "drafts": "spec_decode_num_drafts_total",
    "draft_tokens": "spec_decode_num_draft_tokens_total",
    "accepted_tokens": "spec_decode_num_accepted_tokens_total",
}
# vLLM's per-position counter (label `position`, 0 = the first draft token): how many times the
# draft token at that position was accepted. Read as `accepted_tokens_pos_<k>`.
PER_POSITION_COUNTER = "spec_decode_num_accepted_tokens_per_pos_total"
POSITION_KEY = "accepted_tokens_pos_"


def _samples(text: str) -> dict[Sample, float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def parse_metrics(text: str, wanted: Collection[str] | None = None) -> dict[Sample, float]:
    """Every sample as `{(name, frozenset of (label, value) pairs): value}`; with `wanted`, only
    samples whose name is one of them (lines of other metrics are dropped before parsing).

    A text the parser refuses is read again line by line, skipping the lines it refuses: one odd
    line from an exporter should not hide the counters the harness needs.
    """
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if wanted is not None:
        names = tuple(wanted)
        lines = [line for line in lines if line.lstrip().startswith(names)]
    try:
        samples = _samples("\n".join(lines) + "\n")
    except ValueError:
        samples = {}
        for line in lines:
            try:
                samples |= _samples(line + "\n")
            except ValueError:
                continue
    return samples if wanted is None else {key: v for key, v in samples.items() if key[0] in wanted}


def metric_total(samples: dict[Sample, float], name: str) -> float | None:
    """Sum of `name` over all its label sets (one per model, engine, ...); None when the server
    does not export it (a missing counter is not a zero)."""
    values = [value for (sample_name, _), value in samples.items() if sample_name == name]
    return sum(values) if values else None


def per_position_totals(samples: dict[Sample, float], name: str) -> dict[str, float]:
    """`accepted_tokens_pos_<k>` totals of a per-position counter, summed over its other labels."""
    totals: dict[str, float] = {}
    for (sample_name, labels), value in samples.items():
        position = dict(labels).get("position", "")
        if sample_name == name and position.isdigit():
            key = f"{POSITION_KEY}{int(position)}"
            totals[key] = totals.get(key, 0.0) + value
    return dict(sorted(totals.items(), key=lambda item: int(item[0].removeprefix(POSITION_KEY))))


def spec_decode_counters(text: str, prefix: str) -> dict[str, float] | None:
    """Speculative totals since server start (drafts, draft_tokens, accepted_tokens, and
    `accepted_tokens_pos_<k>` where the engine counts acceptance per position) of the engine whose
    metric names start with `prefix`: those it exports; None when it exports none."""
    names = {short: prefix + name for short, name in SPEC_COUNTERS.items()}
    samples = parse_metrics(text, {*names.values(), prefix + PER_POSITION_COUNTER})
    totals = {short: metric_total(samples, name) for short, name in names.items()}
    exported = {short: total for short, total in totals.items() if total is not None}
    return (exported | per_position_totals(samples, prefix + PER_POSITION_COUNTER)) or None


def counter_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What accumulated between two readings, of the counters both readings hold."""
    return {key: after[key] - before[key] for key in after if key in before}


def accept_length_from_counters(delta: dict[str, float]) -> float | None:
    """Tokens per drafting step, `1 + accepted_tokens / drafts` (the bonus token counts as one).

    vLLM counts only the steps that had a draft, so steps where the n-gram drafter found nothing
    are left out. None when there were no drafts: "no drafts" is not "every draft rejected".
    """
    drafts = delta.get("drafts", 0.0)
    if drafts <= 0:
        return None
    return 1.0 + delta.get("accepted_tokens", 0.0) / drafts


def scrape(http: httpx.Client, base_url: str) -> str | None:
    """The text of `GET /metrics`, or None when the server does not export metrics."""
    resp = http.get(f"{base_url}/metrics")
    return resp.text if resp.status_code == 200 else None
