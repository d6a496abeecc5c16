"""The metric catalogue: every metric of a run summary, stated once.

One row per metric: name, unit, kind (how the summary computes it), direction (is higher better),
the stats the headline view shows, the stats `compare` sets against a baseline request by request,
the nightly gate (default threshold on the relative change, and the stat it reads), and a short
description. The units of the summary, the headline view, the comparison columns and the nightly
gate are all read from here; docs/metrics.md defines each name (a unit test checks it lists all).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.engines.base import ERROR_KINDS
from harness.metrics.energy import DOMAINS, ENERGY_UNITS
from harness.metrics.load import LAG_WARNING_MS
from harness.metrics.roofline import ROOFLINE_UNITS
from harness.metrics.verify_cost import VERIFY_COST_UNITS

HIGHER, LOWER, NEITHER = +1, -1, 0  # direction: which way is better
# Kinds: how the summary computes the metric.
DISTRIBUTION = "distribution"  # per-request samples: stats n..max and the tail certification flags
RUN = "run"  # one value per run from the derived table (stat "value")
CORRECTNESS = "correctness"  # one value, when the table has a boolean `correct` column
COUNTER = "counter"  # one value from the server's own counters over the measured requests
ENERGY = "energy"  # one value from the power samples recorded beside the requests
ACCURACY = "accuracy"  # a scored workload's proportion: mean, 95% interval and n
ROOFLINE = "roofline"  # one value from the model's config, the served dtypes and the measured step
PAIR = "pair"  # one value of a speculative run against its non-speculative baseline, in compare
POSITION = "position"  # from the run's histogram of verify steps by accepted drafts (one stat per position)
CATEGORY = "category"  # per category of the prompts (harness.analysis.categories), beside a baseline
SLO = "slo"  # one value of the requests judged against the run's --slo targets (harness.metrics.slo)
DEFINITION = "definition"  # acceptance under one engine's or tool's definition (harness.metrics.acceptance)


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    kind: str
    direction: int
    description: str
    headline: tuple[str, ...] = ()  # stats shown in the headline view, in order
    compared: tuple[str, ...] = ()  # stats compared against a baseline run, request by request
    gate: float | None = None  # nightly: default threshold on the relative change (None: not gated)
    gate_stat: str = "value"  # nightly: the stat the gate reads


def _d(name: str, unit: str, direction: int, description: str, **extra) -> Metric:
    return Metric(name, unit, DISTRIBUTION, direction, description, **extra)


def _r(name: str, unit: str, direction: int, description: str, **extra) -> Metric:
    return Metric(name, unit, RUN, direction, description, **extra)


MEAN_P50_P95 = ("mean", "p50", "p95")
INTERVAL = ("mean", "ci95_low", "ci95_high")

DISTRIBUTIONS = (
    # The server's own TTFT and TPOT stand beside the client's, in this order, in the headline view.
    _d("ttft_ms", "ms", LOWER, "time to first token", headline=MEAN_P50_P95, compared=("mean", "p95"),
       gate=0.10, gate_stat="mean"),
    _d("ttfat_ms", "ms", LOWER, "time to first answer token (past a reasoning model's thinking)",
       headline=MEAN_P50_P95, compared=("mean",)),
    _d("server_ttft_ms", "ms", LOWER, "time to first token as the server measured it", headline=MEAN_P50_P95),
    _d("tpot_ms", "ms", LOWER, "time per output token after the first", headline=MEAN_P50_P95,
       compared=("mean",), gate=0.05, gate_stat="mean"),
    _d("server_tpot_ms", "ms", LOWER, "time per output token from the server's timings", headline=MEAN_P50_P95),
    _d("e2e_ms", "ms", LOWER, "end-to-end latency", headline=MEAN_P50_P95, compared=MEAN_P50_P95,
       gate=0.10, gate_stat="p95"),
    _d("decode_ms", "ms", LOWER, "first token to [DONE]"),
    _d("e2e_per_token_ms", "ms/token", LOWER, "end-to-end latency per output token"),
    _d("decode_tok_s", "tok/s", HIGHER, "per-request decode rate", compared=("mean",)),
    _d("itl_ms", "ms", LOWER, "inter-token latency, one sample per token"),
    _d("chunk_gap_ms", "ms", NEITHER, "gap between token-bearing chunks"),
    _d("tokens_per_chunk", "tokens/chunk", NEITHER, "output tokens per token-bearing chunk"),
    _d("tokens_per_step", "tokens/step", HIGHER, "output tokens per engine step"),
    _d("completion_tokens", "tokens", NEITHER, "output length reported by the server",
       headline=("mean", "p50"), compared=("mean",)),
    _d("reasoning_tokens", "tokens", NEITHER, "thinking tokens of the output, as the server reported them"),
    _d("prompt_tokens", "tokens", NEITHER, "prompt length reported by the server"),
    _d("cached_tokens", "tokens", NEITHER, "prompt tokens served from the prefix cache"),
    _d("accept_length", "tokens/round", HIGHER, "tokens per speculative verify round", headline=("mean",)),
    _d("accept_rate", "fraction", HIGHER, "accepted over proposed draft tokens"),
    _d("server_e2e_ms", "ms", LOWER, "end-to-end latency as the server measured it"),
    _d("ttft_client_minus_server_ms", "ms", NEITHER, "client TTFT minus server TTFT"),
    _d("e2e_client_minus_server_ms", "ms", NEITHER, "client e2e minus server e2e"),
    # Open loop (harness.metrics.load): lag behind the arrival schedule, and times from the due time.
    _d("send_lag_ms", "ms", LOWER, "open loop: actual send minus scheduled send"),
    _d("response_ttft_ms", "ms", LOWER, "open loop: time to first token from the scheduled send",
       headline=MEAN_P50_P95),
    _d("response_e2e_ms", "ms", LOWER, "open loop: end-to-end latency from the scheduled send",
       headline=MEAN_P50_P95, compared=("p95",)),
)

RUN_VALUES = (
    _r("requests", "count", NEITHER, "requests recorded, ok or failed"),
    _r("requests_ok", "count", NEITHER, "requests that succeeded: every timing figure is theirs",
       headline=("value",)),
    _r("requests_failed", "count", LOWER, "requests recorded as failed (any error kind)", headline=("value",)),
    _r("error_rate", "fraction", LOWER, "failed requests over requests recorded"),
    *(_r(f"errors_{kind}", "count", LOWER, f"failed requests of kind {kind}") for kind in ERROR_KINDS),
    _r("run_span_s", "s", NEITHER, "first request sent to last [DONE]"),
    _r("output_throughput", "tok/s", HIGHER, "output tokens over the run span"),
    _r("decode_throughput_aggregate", "tok/s", HIGHER, "decode tokens over decode time, pooled",
       headline=("value",), compared=("value",), gate=0.05),
    _r("decode_throughput_mean_of_requests", "tok/s", HIGHER, "mean of per-request decode rates",
       headline=("value",)),
    _r("accept_length_request_weighted", "tokens/round", HIGHER, "mean of per-request accept lengths"),
    _r("accept_length_token_weighted", "tokens/round", HIGHER, "total tokens over total verify rounds",
       headline=("value",), compared=("value",), gate=0.05),
    _r("prefix_cache_hit_rate", "fraction", NEITHER, "prompt tokens served from the prefix cache over prompt "
       "tokens, as the server reported each request's cached_tokens"),
    _r("requests_flagged", "count", LOWER, "requests whose stream hides the decode (any rule)",
       headline=("value",)),
    _r("requests_buffered", "count", LOWER, "requests most of whose answer arrived at once"),
    _r("requests_late_first_token", "count", LOWER, "requests whose first token was held back"),
    _r("requests_sparse", "count", LOWER, "requests with far fewer chunks than tokens"),
    _r("requests_client_stalled", "count", LOWER, "requests whose first token the client itself stamped late"),
    _r("offered_rate_rps", "req/s", NEITHER, "open loop: requests over the span of their scheduled sends",
       headline=("value",)),
    _r("achieved_rate_rps", "req/s", HIGHER, "open loop: requests over the span of their actual sends",
       headline=("value",)),
    _r("completed_rate_rps", "req/s", HIGHER, "ok requests over first send to last end (request throughput)",
       headline=("value",)),
    _r("requests_late", "count", LOWER, f"open loop: requests sent over {LAG_WARNING_MS:g} ms after their "
       "scheduled time"),
)

SLO_VALUES = (
    Metric("slo_attainment", "fraction", SLO, HIGHER, "requests that met every SLO target over requests "
           "recorded", headline=INTERVAL, compared=("mean",), gate=0.05, gate_stat="mean"),
    Metric("slo_requests_met", "count", SLO, HIGHER, "requests that met every SLO target"),
    Metric("goodput_rps", "req/s", SLO, HIGHER, "requests that met every SLO target over the run span",
           headline=("value",), compared=("value",), gate=0.10),
    Metric("goodput_tok_s", "tok/s", SLO, HIGHER, "output tokens of the requests that met every SLO target "
           "over the run span", headline=("value",)),
    *(Metric(f"slo_attainment_{figure}", "fraction", SLO, HIGHER, f"requests within the {figure} target")
      for figure in ("ttft", "tpot", "e2e")),
)

CORRECTNESS_VALUES = (
    Metric("correct_answers", "count", CORRECTNESS, HIGHER, "requests whose answer is correct"),
    Metric("accuracy", "fraction", CORRECTNESS, HIGHER, "correct answers over scored requests"),
    Metric("tokens_per_correct_answer", "tokens", CORRECTNESS, LOWER, "output tokens per correct answer"),
    Metric("seconds_per_correct_answer", "s", CORRECTNESS, LOWER, "request time per correct answer"),
)

COUNTER_VALUES = (
    Metric("accept_length_server_counters", "tokens/round", COUNTER, HIGHER,
           "accept length from the server's counters over the measured requests", headline=("value",)),
    Metric("prefix_cache_hit_rate_server", "fraction", COUNTER, NEITHER,
           "prefix-cache hits over queries from the server's /metrics counters over the measured requests"),
)

ENERGY_DIRECTION = {"energy_j": LOWER, "energy_per_output_token_j": LOWER, "output_tokens_per_j": HIGHER,
                    "power_mean_w": NEITHER, "power_peak_w": NEITHER}
ENERGY_HEADLINE = ("energy_per_output_token_j", "output_tokens_per_j", "power_mean_w", "power_peak_w")
ENERGY_VALUES = tuple(
    Metric(f"{domain}_{suffix}", unit, ENERGY, ENERGY_DIRECTION[suffix], f"{domain} {suffix.replace('_', ' ')}",
           headline=("value",) if suffix in ENERGY_HEADLINE else ())
    for domain in DOMAINS for suffix, unit in ENERGY_UNITS.items())

ROOFLINE_DIRECTION = {"roofline_step_ms": LOWER, "roofline_achieved_gbps": HIGHER, "roofline_fraction_of_peak": HIGHER}
ROOFLINE_HEADLINE = ("roofline_bytes_per_step", "roofline_achieved_gbps", "roofline_fraction_of_peak")
ROOFLINE_VALUES = tuple(
    Metric(name, unit, ROOFLINE, ROOFLINE_DIRECTION.get(name, NEITHER),
           f"decode roofline: {name.removeprefix('roofline_').replace('_', ' ')}",
           headline=("value",) if name in ROOFLINE_HEADLINE else ())
    for name, unit in ROOFLINE_UNITS.items())

ACCURACY_VALUES = (
    Metric("gsm8k_accuracy_strict", "fraction", ACCURACY, HIGHER, "GSM8K accuracy, strict match",
           headline=INTERVAL, gate=0.05, gate_stat="mean"),
    Metric("gsm8k_accuracy_flexible", "fraction", ACCURACY, HIGHER, "GSM8K accuracy, flexible extract",
           headline=INTERVAL),
    Metric("gsm8k_questions_failed", "count", ACCURACY, LOWER,
           "questions whose request failed (counted as not answered)", headline=("value",)),
    Metric("gsm8k_invalid_rate_strict", "fraction", ACCURACY, LOWER, "GSM8K answers without a strict match"),
    Metric("gsm8k_invalid_rate_flexible", "fraction", ACCURACY, LOWER, "GSM8K answers without any number"),
    *(Metric(f"lm_eval_{task}_exact_match,{lm_filter}", "fraction", ACCURACY, HIGHER,
             f"GSM8K scored by lm-eval's {task} task, {lm_filter} (its definition; stat stderr is lm-eval's)",
             headline=INTERVAL if (task, lm_filter) == ("gsm8k", "strict-match") else ())
      for task in ("gsm8k", "gsm8k_cot") for lm_filter in ("strict-match", "flexible-extract")),
)

PAIR_DIRECTION = {"plain_step_ms": LOWER, "verify_round_ms": LOWER, "verify_cost_ratio": LOWER,
                  "decode_tokens_per_round": HIGHER, "break_even_tokens_per_round": LOWER, "speedup": HIGHER}
PAIR_VALUES = tuple(Metric(name, unit, PAIR, PAIR_DIRECTION[name], f"verification cost: {name.replace('_', ' ')}")
                    for name, unit in VERIFY_COST_UNITS.items())

POSITION_VALUES = (
    Metric("accept_length_histogram", "tokens/step", POSITION, HIGHER,
           "tokens per verify step from the histogram of accepted drafts"),
    Metric("verify_steps_histogram", "count", POSITION, NEITHER, "verify steps the histogram counts"),
    Metric("acceptance_at_position", "fraction", POSITION, HIGHER,
           "chance the k-th draft is accepted given the earlier ones were (stat position_k)"),
    Metric("tokens_per_step_share", "fraction", POSITION, NEITHER,
           "share of verify steps that produced j tokens (stat tokens_j)"),
    Metric("acceptance_at_position_unconditional", "fraction", POSITION, HIGHER,
           "chance the k-th draft is accepted over every drafting step (stat position_k; vLLM's per-position rate)"),
)

DEFINITION_VALUES = (
    Metric("mean_acceptance_length_request_weighted", "tokens/round", DEFINITION, HIGHER,
           "mean over requests of 1 + accepted drafts / rounds (vLLM's per-request, AIPerf's per-request mean)"),
    Metric("mean_acceptance_length_token_weighted", "tokens/round", DEFINITION, HIGHER,
           "1 + total accepted drafts / total rounds (vLLM's log and counters, llama.cpp's mean len, AIPerf)"),
    Metric("accepted_drafts_per_round", "tokens/round", DEFINITION, HIGHER,
           "total accepted drafts / total rounds, without the bonus token"),
    Metric("draft_acceptance_rate_request_weighted", "fraction", DEFINITION, HIGHER,
           "mean over requests of accepted / proposed drafts (AIPerf's per-request draft acceptance rate)"),
    Metric("draft_acceptance_rate_token_weighted", "fraction", DEFINITION, HIGHER,
           "total accepted / total proposed drafts (vLLM's, llama.cpp's and AIPerf's overall rate)"),
    Metric("accepted_per_verified_request_weighted", "ratio", DEFINITION, HIGHER,
           "mean over requests of (accepted + rounds) / (proposed + rounds) (AIPerf's accepted per verified)"),
)

CATEGORY_VALUES = (
    Metric("request_tok_s", "tok/s", CATEGORY, HIGHER, "per-request tokens over its whole request time"),
    Metric("speedup_mean_of_requests", "ratio", CATEGORY, HIGHER,
           "mean request tok/s over the baseline's, same questions (Spec-Bench)"),
    Metric("speedup_aggregate", "ratio", CATEGORY, HIGHER, "total tok/s over the baseline's, same questions"),
)

CATALOGUE: dict[str, Metric] = {m.name: m for m in (*DISTRIBUTIONS, *RUN_VALUES, *CORRECTNESS_VALUES,
                                                     *COUNTER_VALUES, *ENERGY_VALUES, *ROOFLINE_VALUES,
                                                     *SLO_VALUES, *ACCURACY_VALUES, *PAIR_VALUES, *POSITION_VALUES,
                                                     *DEFINITION_VALUES, *CATEGORY_VALUES)}


def units(kind: str) -> dict[str, str]:
    """Unit of every metric of one kind, by name, in catalogue order."""
    return {m.name: m.unit for m in CATALOGUE.values() if m.kind == kind}


def headline_stats() -> list[tuple[str, list[str]]]:
    """(metric, stats) of the headline view, in catalogue order."""
    return [(m.name, list(m.headline)) for m in CATALOGUE.values() if m.headline]


def compared_stats() -> list[tuple[str, str]]:
    """(metric, stat) pairs compared against a baseline request by request, in catalogue order."""
    return [(m.name, stat) for m in CATALOGUE.values() for stat in m.compared]


def gated() -> list[Metric]:
    """The metrics the nightly job gates, in catalogue order."""
    return [m for m in CATALOGUE.values() if m.gate is not None]


def default_thresholds() -> dict[str, float]:
    """Default nightly threshold of each gated metric (relative change; accuracy: the drop in
    fraction of questions, applied together with McNemar's test)."""
    return {m.name: m.gate for m in gated()}
