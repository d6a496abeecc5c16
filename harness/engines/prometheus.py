"""Prometheus text from a server's `GET /metrics`, and vLLM's speculative-decoding counters in it.

Counters are running totals since the server started, so a run's own numbers are the difference
between a scrape before and a scrape after it (`counter_delta`). Nothing here is a per-request
fact: these totals include every request the server handled in between, warm-up included.
"""

from __future__ import annotations

import math
import re

import httpx

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

# `name{labels} value [timestamp]`; names may hold colons (vLLM's `vllm:` prefix).
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
# One `key="value"` pair; the value may hold escaped quotes, commas and braces.
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], value)


def _labels(body: str | None) -> frozenset[tuple[str, str]]:
    if not body:
        return frozenset()
    return frozenset((m.group(1), _unescape(m.group(2))) for m in _LABEL.finditer(body))


def _value(token: str) -> float:
    """A sample value; Prometheus spells infinities `+Inf`/`-Inf` and not-a-number `NaN`."""
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    return special[token] if token in special else float(token)


def parse_metrics(text: str) -> dict[Sample, float]:
    """Every sample line as `{(name, frozenset of (label, value) pairs): value}`.

    Comments (`# HELP`, `# TYPE`), blank lines and lines that do not parse are skipped: one odd
    line from an exporter should not hide the counters the harness needs.
    """
    samples: dict[Sample, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            samples[(match.group(1), _labels(match.group(2)))] = _value(match.group(3))
        except ValueError:
            continue
    return samples


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
    samples = parse_metrics(text)
    totals = {short: metric_total(samples, prefix + name) for short, name in SPEC_COUNTERS.items()}
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
