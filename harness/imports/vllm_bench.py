"""`vllm bench serve --save-result` JSON (vllm/benchmarks/serve.py, vLLM 0.32.0).

Always aggregates; with `--save-detailed` also per-request lists (`input_lens`, `output_lens`,
`ttfts`, `itls`, `start_times`, `generated_texts`, `errors`). `latencies` is kept even without it,
so a plain file still has each request's end-to-end latency. Times in the lists are seconds.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.imports.imported import Aggregate, Imported, RequestRow, check_lengths, finite, first_problem

TOOL = "vllm bench serve"
DEFINITIONS = {
    "ttft_ms": "request sent to the first SSE chunk that has `choices` (its text may be empty)",
    "tpot_ms": "(latency - ttft) / (output tokens - 1) per request, requests of one token left out; "
               "output tokens from the server's usage",
    "itl_ms": "gap between consecutive chunks that have `choices`: one sample per chunk, however many tokens it holds",
    "e2e_ms": "request sent to the last chunk that has `choices` (not to [DONE])",
}
FAMILIES = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms"}
FAMILY_KEY = re.compile(r"^(mean|median|std|p[0-9.]+)_(ttft|tpot|itl|e2el)_ms$")
SCALARS = {"duration": "s", "completed": "count", "failed": "count", "total_input_tokens": "tokens",
           "total_output_tokens": "tokens", "request_throughput": "req/s", "request_goodput": "req/s",
           "output_throughput": "tok/s", "total_token_throughput": "tok/s", "max_output_tokens_per_s": "tok/s",
           "max_concurrent_requests": "count", "spec_decode_acceptance_rate": "percent",
           "spec_decode_acceptance_length": "tokens/round", "spec_decode_num_drafts": "count",
           "spec_decode_draft_tokens": "count", "spec_decode_accepted_tokens": "count"}
# The tool's acceptance figures, as `benchmark` in vllm/benchmarks/serve.py computes them: deltas of the
# server's `vllm:spec_decode_*_total` counters (`fetch_spec_decode_metrics`, summed over every label
# set) read from /metrics just before the first measured request and just after the last (its initial
# test prompt and warm-ups are outside), so the whole server's traffic in that window. In the file only
# when the server exports the counters and proposed drafts in the window.
SPEC_DEFINITIONS = {
    "spec_decode_acceptance_length": "1 + accepted / drafts over the run, from the server's /metrics counter "
                                     "deltas: drafts counts only the steps that proposed a draft; the bonus token "
                                     "counted; token-weighted",
    "spec_decode_acceptance_rate": "100 * accepted / draft tokens over the run (counter deltas), percent; "
                                   "no bonus token",
    "spec_decode_per_position_acceptance_rate": "accepted at draft position k / drafts over the run (counter "
                                                "deltas): unconditional, position_1 is the first draft token",
    "spec_decode_num_drafts": "drafting steps in the run (counter delta)",
    "spec_decode_draft_tokens": "draft tokens proposed in the run (counter delta)",
    "spec_decode_accepted_tokens": "draft tokens accepted in the run (counter delta)",
}
PER_POSITION = "spec_decode_per_position_acceptance_rates"


class VllmResult(BaseModel):
    """The keys this import reads; the file holds more (each aggregate is read by its key pattern)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    date: str
    backend: str | None = None
    model_id: str | None = None
    num_prompts: int | None = None
    completed: int
    input_lens: list[int] | None = None
    output_lens: list[int] | None = None
    ttfts: list[float] | None = None
    itls: list[list[float]] | None = None
    latencies: list[float] | None = None
    generated_texts: list[str] | None = None
    errors: list[str] | None = None


def is_vllm_result(obj: dict[str, Any]) -> bool:
    return "date" in obj and ("endpoint_type" in obj or "tokenizer_id" in obj or "mean_e2el_ms" in obj)


def read_vllm(obj: dict[str, Any], where: str) -> Imported:
    try:
        result = VllmResult.model_validate(obj)
    except ValidationError as exc:
        raise first_problem(exc, where) from None
    rows = aggregates(obj)
    kept = {row.metric for row in rows}
    definitions = DEFINITIONS | {key: text for key, text in SPEC_DEFINITIONS.items() if key in kept}
    return Imported(tool=TOOL, tool_version=None, definitions=definitions, aggregates=rows,
                    requests=requests(result, where),
                    workload={"name": "vllm-bench-serve", "num_prompts": result.num_prompts})


def aggregates(obj: dict[str, Any]) -> list[Aggregate]:
    """The latency families by key pattern (mean, median, std, pNN), the known scalars, and the
    speculative-decoding figures where the server exported its counters (per position as its own rows)."""
    rows = []
    for key, value in obj.items():
        number, match = finite(value), FAMILY_KEY.match(key)
        if number is None:
            continue  # a figure the run did not produce (None) is absent, not zero
        if match:
            stat = {"median": "p50"}.get(match[1], match[1])
            rows.append(Aggregate(FAMILIES[match[2]], f"tool_{stat}", number, "ms", key))
        elif key in SCALARS:
            rows.append(Aggregate(key, "tool_value", number, SCALARS[key], key))
    positions = obj.get(PER_POSITION)
    if isinstance(positions, list):  # a fraction per draft position, the first draft first
        rows += [Aggregate("spec_decode_per_position_acceptance_rate", f"position_{k}", number, "fraction",
                           PER_POSITION) for k, value in enumerate(positions, 1) if (number := finite(value)) is not None]
    return rows


def requests(result: VllmResult, where: str) -> list[RequestRow] | None:
    """Per request where `--save-detailed` kept the lists, else None. A request succeeded when it got a
    first chunk (ttft > 0) and has no error: a failed one keeps the defaults 0 and [] that are no figures."""
    if result.ttfts is None:
        return None
    count = check_lengths({"ttfts": result.ttfts, "itls": result.itls, "latencies": result.latencies,
                           "input_lens": result.input_lens, "output_lens": result.output_lens,
                           "errors": result.errors, "generated_texts": result.generated_texts}, where)
    return [_row(result, index) for index in range(count)]


def _row(result: VllmResult, index: int) -> RequestRow:
    def at(values: list | None) -> Any:
        return None if values is None else values[index]

    error = at(result.errors) or None
    ttft = result.ttfts[index]
    if error is not None or not ttft > 0:
        return RequestRow(index, False, error_message=error or "no chunk received", prompt_tokens=at(result.input_lens))
    latency, tokens = at(result.latencies), at(result.output_lens)
    tpot = (latency - ttft) / (tokens - 1) * 1000 if latency is not None and tokens is not None and tokens > 1 else None
    return RequestRow(index, True, prompt_tokens=at(result.input_lens), completion_tokens=tokens,
                      ttft_ms=ttft * 1000, tpot_ms=tpot, e2e_ms=None if latency is None else latency * 1000,
                      itl_ms=[gap * 1000 for gap in at(result.itls) or []], output_text=at(result.generated_texts))
