"""The guard's stream check: a short canary request must really stream before anything is measured.

The canary's record goes through the same stream integrity rules as every measured request
(harness.metrics.integrity). A server whose stream hides its decode would have its client TTFT,
TPOT, ITL and decode rates left out request by request; refusing it up front says so in one line.
`--allow-buffered` measures anyway (the finding stays in the manifest, marked as allowed).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import pandas as pd

from harness.engines.base import StreamResult
from harness.guard.checks import Finding
from harness.metrics import derive_requests
from harness.metrics.integrity import EVIDENCE, FLAGS
from harness.records.requests import COLUMNS, RequestRecord
from harness.spec import Prompt


def stream_evidence(result: StreamResult, prompt: Prompt, engine: str, api: str) -> dict[str, Any]:
    """The integrity flags and evidence of one streamed request, as derive_requests reads them."""
    record = RequestRecord.build(run_id="canary", seq=0, workload="canary", engine=engine, api=api,
                                 prompt=prompt, result=result)
    row = derive_requests(pd.DataFrame([asdict(record)], columns=COLUMNS)).iloc[0]
    return {"completion_tokens": result.completion_tokens, **{flag: bool(row[flag]) for flag in FLAGS},
            **{name: float(row[name]) for name in EVIDENCE}}


def _why(evidence: dict[str, Any]) -> str:
    """The flags and the figures behind them, for one line."""
    facts = [f"{flag.replace('_', ' ')}" for flag in FLAGS if evidence[flag]]
    figures = {"burst_share": "{:.0%} of its tokens arrived within 1% of the decode",
               "client_decode_share": "the client saw the decode over {:.0%} of the server's decode time",
               "ttft_excess_ms": "the first token arrived {:.0f} ms late"}
    facts += [text.format(evidence[name]) for name, text in figures.items() if not math.isnan(evidence[name])]
    return "; ".join(facts)


def held_back(evidence: dict[str, Any]) -> bool:
    """Whether any integrity rule flagged the canary's stream."""
    return any(evidence[flag] for flag in FLAGS)


def check_stream(evidence: dict[str, Any], allow_buffered: bool = False, attempts: int = 1) -> list[Finding]:
    """The last canary's stream must show its decode; `allow_buffered` turns a failure into a recorded
    pass. `attempts`: canaries sent, the ones before the last held back too."""
    tokens = evidence.get("completion_tokens")
    if not held_back(evidence):
        retried = f" (attempt {attempts}; the ones before were held back)" if attempts > 1 else ""
        return [Finding("stream", True, f"the canary's {tokens} tokens streamed as they were made{retried}")]
    tries = f" in any of {attempts} attempts" if attempts > 1 else ""
    message = f"the canary's {tokens} tokens did not stream as they were made{tries} ({_why(evidence)})"
    if allow_buffered:
        return [Finding("stream", True, f"{message}; measured anyway (--allow-buffered)")]
    return [Finding("stream", False, f"{message}; client TTFT, TPOT and ITL would not be the decode's "
                                     f"(--allow-buffered measures anyway)")]
