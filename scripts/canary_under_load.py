"""How often the guard's stream canary is held back on a loaded host, and how often the guard refuses.

Against the embedded `cpu-testbed` SGLang server (or `--server URL`), sends `--sequences` guard
sequences by each of two rules, interleaved so that both meet the same load:
- back to back: up to STREAM_ATTEMPTS canaries with no pause between them;
- spread: the guard's own `streamed_canary` (pauses of STREAM_RETRY_PAUSES_S between them).
Prints, per rule, the sequences refused (every canary held back) and the attempts each needed.
Run it under bursts of load to see what the pauses buy:

    .venv/bin/python scripts/burst_load.py -- .venv/bin/python scripts/canary_under_load.py
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os

from harness.engines.detect import make_backend
from harness.guard.preflight import CANARY, STREAM_ATTEMPTS, STREAM_RETRY_PAUSES_S, send_canary, streamed_canary
from harness.guard.stream import held_back, stream_evidence
from harness.run.embedded import embedded_server


def back_to_back(backend, base_url: str) -> tuple[int, bool]:
    """(attempts, streamed) with no pause between the canaries."""
    for attempt in range(1, STREAM_ATTEMPTS + 1):
        canary = send_canary(backend, base_url)
        if not held_back(stream_evidence(canary, CANARY, backend.engine, backend.name)):
            return attempt, True
    return STREAM_ATTEMPTS, False


def spread(backend, base_url: str) -> tuple[int, bool]:
    """(attempts, streamed) by the guard's own rule."""
    _, evidence, attempts = streamed_canary(backend, base_url)
    return attempts, not held_back(evidence)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=15, help="guard sequences per rule [15]")
    parser.add_argument("--server", help="a running SGLang server (default: launch the embedded test bed)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        base_url = args.server or stack.enter_context(embedded_server("cpu-testbed", log_name="canary-load")).base_url
        backend = make_backend("auto", base_url)
        outcomes = {"back to back": collections.Counter(), "spread": collections.Counter()}
        for _ in range(args.sequences):
            for rule, guard in (("back to back", back_to_back), ("spread", spread)):
                attempts, streamed = guard(backend, base_url)
                outcomes[rule]["streamed at attempt %d" % attempts if streamed else "refused"] += 1
    print(f"load average now {os.getloadavg()[0]:.2f}; pauses of the spread rule: {STREAM_RETRY_PAUSES_S} s")
    for rule, counts in outcomes.items():
        print(f"{rule}: {counts['refused']} of {args.sequences} refused; {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
