"""Prometheus text parsing and vLLM's speculative counters, on real `/metrics` captures.

`tests/fixtures/vllm_0.32.0_cpu_metrics_{before,after}.prom` are `GET /metrics` of vLLM 0.32.0 (CPU,
n-gram speculation with 3 draft tokens) taken just before and just after the three requests recorded
in `vllm_0.32.0_cpu_*.sse`, and nothing else reached the server in between: the counter delta must
equal the sum of those requests' own per-request speculative numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.engines.prometheus import (
    accept_length_from_counters,
    counter_delta,
    metric_total,
    parse_metrics,
    spec_decode_counters,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
STREAMS = ("completions_ngram.sse", "chat_ngram.sse", "completions_usage_at_end.sse")
TINY = frozenset({("engine", "0"), ("model_name", "tiny")})


def capture(name: str) -> str:
    return (FIXTURES / f"vllm_0.32.0_cpu_{name}").read_text(encoding="utf-8")


def per_request_spec(name: str) -> dict[str, float]:
    """`metrics.speculative_decoding` from the final usage chunk of a recorded stream."""
    lines = [line for line in capture(name).splitlines() if line.startswith("data: {")]
    return json.loads(lines[-1][5:])["metrics"]["speculative_decoding"]


def test_parse_reads_names_labels_and_values_of_a_real_capture():
    samples = parse_metrics(capture("metrics_after.prom"))
    assert samples[("vllm:spec_decode_num_drafts_total", TINY)] == 377.0
    per_pos = ("vllm:spec_decode_num_accepted_tokens_per_pos_total", TINY | {("position", "2")})
    assert samples[per_pos] == 218.0
    assert samples[("process_virtual_memory_bytes", frozenset())] == 2.18513408e09
    bucket = ("vllm:request_generation_tokens_bucket", TINY | {("le", "+Inf")})
    assert samples[bucket] == 53.0
    assert not any(name.startswith("#") for name, _ in samples)


def test_parse_handles_escapes_specials_timestamps_and_junk():
    text = "\n".join([
        "# HELP odd A metric with awkward labels.",
        'odd{path="/a,b}",quote="say \\"hi\\"",nl="x\\ny"} 1.5 1700000000000',
        "up_inf +Inf",
        "down_nan NaN",
        "this line is not a sample",
        "",
    ])
    samples = parse_metrics(text)
    labels = frozenset({("path", "/a,b}"), ("quote", 'say "hi"'), ("nl", "x\ny")})
    assert samples[("odd", labels)] == 1.5
    assert samples[("up_inf", frozenset())] == math.inf
    assert math.isnan(samples[("down_nan", frozenset())])
    assert len(samples) == 3


def test_spec_counters_read_totals_not_created_timestamps():
    assert spec_decode_counters(capture("metrics_before.prom"), "vllm:") == {
        "drafts": 373.0, "draft_tokens": 1069.0, "accepted_tokens": 812.0,
        "accepted_tokens_pos_0": 322.0, "accepted_tokens_pos_1": 273.0, "accepted_tokens_pos_2": 217.0}


def test_spec_counters_sum_over_label_sets():
    text = ('vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
            'vllm:spec_decode_num_drafts_total{engine="1"} 5\n'
            'vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9\n')
    assert spec_decode_counters(text, "vllm:") == {"drafts": 15.0}  # the others are not exported: absent
    assert metric_total(parse_metrics(text), "missing_total") is None


def test_an_engine_that_exports_no_spec_counters_has_none_not_zeros():
    text = 'llamacpp:prompt_tokens_total 120\nvllm:spec_decode_num_drafts_total 3\n'
    assert spec_decode_counters(text, "llamacpp:") is None


def test_counter_delta_matches_the_requests_own_numbers():
    before = spec_decode_counters(capture("metrics_before.prom"), "vllm:")
    after = spec_decode_counters(capture("metrics_after.prom"), "vllm:")
    delta = counter_delta(before, after)
    specs = [per_request_spec(name) for name in STREAMS]
    # Every accepted token was accepted at one position: the per-position deltas add up.
    assert [delta[f"accepted_tokens_pos_{k}"] for k in range(3)] == [4.0, 4.0, 1.0]
    assert sum(delta[f"accepted_tokens_pos_{k}"] for k in range(3)) == delta["accepted_tokens"]
    assert {key: delta[key] for key in ("drafts", "draft_tokens", "accepted_tokens")} == {
        "drafts": sum(s["num_spec_steps"] for s in specs),
        "draft_tokens": sum(s["num_draft_tokens"] for s in specs),
        "accepted_tokens": sum(s["num_accepted_draft_tokens"] for s in specs),
    } == {"drafts": 4.0, "draft_tokens": 11.0, "accepted_tokens": 9.0}
    # Token-weighted over the requests: sum(length * steps) / sum(steps).
    weighted = (sum(s["mean_acceptance_length"] * s["num_spec_steps"] for s in specs)
                / sum(s["num_spec_steps"] for s in specs))
    assert accept_length_from_counters(delta) == weighted == 3.25


def test_accept_length_is_none_without_drafts():
    assert accept_length_from_counters({"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}) is None
    assert accept_length_from_counters({}) is None
