"""SGLang `python -m sglang.bench_serving --output-file` JSONL (sglang/benchmark/serving.py, 0.5.23).

One JSON object per line, one line per benchmark run (the file is appended to). Aggregates always;
with `--output-details` also per-request lists (`input_lens`, `output_lens`, `ttfts`, `itls`,
`generated_texts`, `errors`), times in seconds. The lists hold no per-request latency or start
time, so a request's end-to-end latency and TPOT exist only as the tool's aggregates.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.imports.imported import Aggregate, Imported, RequestRow, check_lengths, finite, first_problem

TOOL = "sglang bench_serving"
DEFINITIONS = {
    "ttft_ms": "request sent to the first SSE chunk whose text is not empty",
    "tpot_ms": "(latency - ttft) / (output tokens - 1) per request, requests of one token left out; latency "
               "runs to the last line of the stream ([DONE] included); output tokens from a chunk's usage "
               "where the server sent one, else the length asked for",
    "itl_ms": "gap between consecutive chunks with text: one sample per chunk (with speculation on sglang-oai "
              "backends, spread over the chunk's retokenized tokens)",
    "e2e_ms": "request sent to the last line of the stream",
}
FAMILIES = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e_latency": "e2e_ms"}
FAMILY_KEY = re.compile(r"^(mean|median|std|p[0-9.]+)_(ttft|tpot|itl|e2e_latency)_ms$")
SCALARS = {"duration": "s", "completed": "count", "total_input_tokens": "tokens", "total_output_tokens": "tokens",
           "total_output_tokens_retokenized": "tokens", "request_throughput": "req/s", "input_throughput": "tok/s",
           "output_throughput": "tok/s", "total_throughput": "tok/s", "concurrency": "requests",
           "accept_length": "tokens/step", "max_output_tokens_per_s": "tok/s", "max_concurrent_requests": "count"}
# `accept_length` is the server's `internal_states[0].avg_spec_accept_length` from /server_info, read by
# `benchmark` in sglang/benchmark/serving.py after the run, only with an sglang backend (else null).
# The server computes it in `_average_accept_length` (srt/managers/scheduler_components/internal_state.py)
# from totals that `report_decode_stats` (metrics_reporter.py) adds to once every `decode_log_interval`
# decode batches (40 by default), and that /flush_cache resets (the tool flushes after its warm-up with
# --flush-cache).
ACCEPT_DEFINITION = ("the server's avg_spec_accept_length (/server_info): tokens made by decode batches over "
                     "request-steps (each batch counts its size), since the server started or its cache was last "
                     "flushed (--flush-cache: after the tool's warm-up), counted only up to the last whole "
                     "decode_log_interval (40 decode batches by default); the bonus token counted, the first "
                     "(prefill) token not; token-weighted over every request the server ran in that time")


class SglangResult(BaseModel):
    """The keys this import reads; each aggregate is read by its key pattern."""

    model_config = ConfigDict(extra="allow", frozen=True)

    backend: str
    dataset_name: str | None = None
    completed: int
    random_input_len: int | None = None
    random_output_len: int | None = None
    server_info: dict[str, Any] | None = None
    input_lens: list[int] | None = None
    output_lens: list[int] | None = None
    ttfts: list[float] | None = None
    itls: list[list[float]] | None = None
    generated_texts: list[str] | None = None
    errors: list[str] | None = None


def is_sglang_result(obj: dict[str, Any]) -> bool:
    return "mean_e2e_latency_ms" in obj or "total_output_tokens_retokenized" in obj


def read_sglang(obj: dict[str, Any], where: str) -> Imported:
    try:
        result = SglangResult.model_validate(obj)
    except ValidationError as exc:
        raise first_problem(exc, where) from None
    server_version = (result.server_info or {}).get("version")
    workload = {"name": f"sglang-bench-serving-{result.dataset_name or 'unknown'}",
                "input_tokens": result.random_input_len, "output_tokens": result.random_output_len}
    rows = aggregates(obj)
    definitions = DEFINITIONS | ({"accept_length": ACCEPT_DEFINITION}
                                 if any(row.metric == "accept_length" for row in rows) else {})
    return Imported(tool=TOOL, tool_version=None, definitions=definitions, aggregates=rows,
                    requests=requests(result, where), workload=workload,
                    server_version=server_version if isinstance(server_version, str) else None)


def aggregates(obj: dict[str, Any]) -> list[Aggregate]:
    rows = []
    for key, value in obj.items():
        number, match = finite(value), FAMILY_KEY.match(key)
        if number is None:
            continue
        if match:
            stat = {"median": "p50"}.get(match[1], match[1])
            rows.append(Aggregate(FAMILIES[match[2]], f"tool_{stat}", number, "ms", key))
        elif key in SCALARS:
            rows.append(Aggregate(key, "tool_value", number, SCALARS[key], key))
    return rows


def requests(result: SglangResult, where: str) -> list[RequestRow] | None:
    """Per request where `--output-details` kept the lists, else None. A request failed when it has an
    error (its output length is then the placeholder 0); a first chunk with text never seen leaves
    ttft 0, which is no time measured."""
    if result.ttfts is None:
        return None
    count = check_lengths({"ttfts": result.ttfts, "itls": result.itls, "input_lens": result.input_lens,
                           "output_lens": result.output_lens, "errors": result.errors,
                           "generated_texts": result.generated_texts}, where)
    return [_row(result, index) for index in range(count)]


def _row(result: SglangResult, index: int) -> RequestRow:
    def at(values: list | None) -> Any:
        return None if values is None else values[index]

    error = at(result.errors) or None
    if error is not None:
        return RequestRow(index, False, error_message=error, prompt_tokens=at(result.input_lens))
    ttft = result.ttfts[index]
    return RequestRow(index, True, prompt_tokens=at(result.input_lens), completion_tokens=at(result.output_lens),
                      ttft_ms=ttft * 1000 if ttft > 0 else None,
                      itl_ms=[gap * 1000 for gap in at(result.itls) or []], output_text=at(result.generated_texts))
