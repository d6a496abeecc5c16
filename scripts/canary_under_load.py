"""How often the guard's stream canary is held back on a loaded host, and how often the guard refuses.

Against the embedded `cpu-testbed` SGLang server (or `--server URL`), sends `--sequences` guard
sequences by each of two rules, interleaved so that both meet the same load:
- back to back: the guard's `streamed_canary` with no pause between its attempts;
- spread: the guard's own rule (pauses of STREAM_RETRY_PAUSES_S between them).
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
from harness.guard.preflight import STREAM_RETRY_PAUSES_S, streamed_canary
from harness.guard.stream import held_back
from harness.run.embedded import embedded_server

# The same number of attempts by both rules; only the pauses between them differ.
RULES = {"back to back": (0.0,) * len(STREAM_RETRY_PAUSES_S), "spread": STREAM_RETRY_PAUSES_S}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=15, help="guard sequences per rule [15]")
    parser.add_argument("--server", help="a running SGLang server (default: launch the embedded test bed)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        base_url = args.server or stack.enter_context(embedded_server("cpu-testbed", log_name="canary-load")).base_url
        backend = make_backend("auto", base_url)
        outcomes = {rule: collections.Counter() for rule in RULES}
        for _ in range(args.sequences):
            for rule, pauses_s in RULES.items():
                _, evidence, attempts = streamed_canary(backend, base_url, pauses_s=pauses_s)
                outcomes[rule]["refused" if held_back(evidence) else f"streamed at attempt {attempts}"] += 1
    print(f"load average now {os.getloadavg()[0]:.2f}; pauses of the spread rule: {STREAM_RETRY_PAUSES_S} s")
    for rule, counts in outcomes.items():
        print(f"{rule}: {counts['refused']} of {args.sequences} refused; {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
