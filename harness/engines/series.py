"""The server-side series a run samples from `GET /metrics`, by role.

Each engine adapter names, in `Engine.server_series`, which of its Prometheus series plays each
role, so that the timeline and the warnings read roles and never an engine's metric names. A role
an engine does not export is simply absent (the timeline says "not exported"). A gauge is a level
at the moment of the scrape; a counter (`counter=True`) is a running total since the server started,
read as its increase over a window.
"""

from __future__ import annotations

from dataclasses import dataclass

RUNNING = "running"  # requests the engine is running now
QUEUED = "queued"  # requests waiting for a slot
KV_USAGE = "kv_usage"  # fraction of the KV cache in use, 0..1
GEN_THROUGHPUT = "gen_throughput"  # the engine's own recent output tokens/s
GENERATION_TOKENS = "generation_tokens"  # output tokens made since start (counter)
PREEMPTIONS = "preemptions"  # requests preempted (retracted) to free KV cache
PREFIX_CACHE_HITS = "prefix_cache_hits"
PREFIX_CACHE_QUERIES = "prefix_cache_queries"
PREFIX_CACHE_HIT_RATE = "prefix_cache_hit_rate"
SPEC_ACCEPT_LENGTH = "spec_accept_length"
SPEC_DRAFTS = "spec_drafts"
SPEC_ACCEPTED_TOKENS = "spec_accepted_tokens"


@dataclass(frozen=True)
class Series:
    """One role played by one Prometheus sample name (with the `_total` suffix of a counter)."""

    role: str
    metric: str
    counter: bool = False


def by_role(series: tuple[Series, ...]) -> dict[str, Series]:
    return {s.role: s for s in series}
