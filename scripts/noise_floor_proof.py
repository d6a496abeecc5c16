"""False alarms and misses of the stream-integrity noise floor on a loaded host, by two floors.

Against the embedded `cpu-testbed` SGLang server (or `--server URL`), sends `--requests` guard
canaries (64 tokens, greedy) straight to the server and as many through a proxy that holds each
answer's first line `--hold-ms` (a planted late first token: the negative control), interleaved so
that both meet the same load. Each request is judged twice from the same record: by the rules as
they are (noise floor: 20 ms plus the longest stall of the client's own loop while it ran) and with
the stall left out (20 ms alone, and no `client_stalled` flag: the rules before the probe). Prints,
per floor, the healthy requests the rules blame on the server (false alarms) or on the client's own
stall, the held ones flagged (detections), and the stalls seen. Run it under load:

    .venv/bin/python scripts/burst_load.py --workers 6 -- .venv/bin/python scripts/noise_floor_proof.py
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.e2e.proxy: the holding proxy

from harness.engines.detect import make_backend  # noqa: E402
from harness.guard.preflight import CANARY, send_canary  # noqa: E402
from harness.guard.stream import stream_evidence  # noqa: E402
from harness.metrics.integrity import EVIDENCE, FLAGS  # noqa: E402
from harness.run.embedded import embedded_server  # noqa: E402
from tests.e2e.proxy import recording_proxy  # noqa: E402

FLOORS = ("measured", "fixed")  # 20 ms + the client's longest stall; 20 ms alone


def holding(hold_s: float):
    """A proxy rewrite that holds the answer's first data line `hold_s`, then relays the rest as it comes."""
    def make(_headers):
        first = [True]

        def rewrite(line: str) -> str:
            if first[0] and line.startswith("data: {"):
                first[0] = False
                time.sleep(hold_s)
            return line

        return rewrite

    return make


def judged(backend, base_url: str) -> tuple[dict[str, set[str]], dict]:
    """One canary's flags by each floor, and its evidence by the measured floor."""
    result = send_canary(backend, base_url)
    unprobed = dataclasses.replace(result, stall_ns=None, stall_late_ns=None)
    evidence = {floor: stream_evidence(r, CANARY, backend.engine, backend.name)
                for floor, r in zip(FLOORS, (result, unprobed))}
    return {floor: {flag for flag in FLAGS if evidence[floor][flag]} for floor in FLOORS}, evidence["measured"]


def flags_only(counts: collections.Counter) -> dict[str, int]:
    return {flag: counts[flag] for flag in FLAGS if counts[flag]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="canaries each way [40]")
    parser.add_argument("--hold-ms", type=float, default=300.0, help="the planted hold of the first line [300]")
    parser.add_argument("--server", help="a running SGLang server (default: launch the embedded test bed)")
    args = parser.parse_args()
    flagged = {(path, floor): collections.Counter() for path in ("healthy", "held") for floor in FLOORS}
    stalls: list[float] = []
    alarms: list[dict] = []
    loads: list[float] = []
    with contextlib.ExitStack() as stack:
        base_url = args.server or stack.enter_context(embedded_server("cpu-testbed", log_name="noise-floor")).base_url
        held_url, _ = stack.enter_context(recording_proxy(base_url, rewriting=holding(args.hold_ms / 1000)))
        direct, proxied = make_backend("auto", base_url), make_backend("auto", held_url)
        for _ in range(args.requests):
            for path, backend, url in (("healthy", direct, base_url), ("held", proxied, held_url)):
                flags, evidence = judged(backend, url)
                for floor in FLOORS:
                    server = flags[floor] - {"client_stalled"}
                    flagged[(path, floor)].update(["any"] * bool(flags[floor]) + ["server"] * bool(server)
                                                  + sorted(flags[floor]))
                if path == "healthy":
                    stalls.append(evidence["first_token_stall_ms"])
                    alarms += [evidence] if flags["measured"] else []
            loads.append(os.getloadavg()[0])
    print(f"{args.requests} canaries each way; first line held {args.hold_ms:g} ms; load average (1 min) "
          f"seen {min(loads):.2f}..{max(loads):.2f}; the client's stall at the healthy first tokens: median "
          f"{np.median(stalls):.1f} ms, max {max(stalls):.1f} ms, over 20 ms in {sum(s > 20 for s in stalls)}")
    for floor in FLOORS:
        healthy, held = flagged[("healthy", floor)], flagged[("held", floor)]
        print(f"floor {floor}: healthy blamed on the server {healthy['server']} of {args.requests} (false alarms), "
              f"on the client {healthy['client_stalled']}; held flagged {held['any']} of {args.requests} "
              f"(detections; late first token {held['late_first_token']}); flags of the healthy {flags_only(healthy)}, "
              f"of the held {flags_only(held)}")
    for evidence in alarms:  # the healthy requests the measured floor flagged, with their figures
        print("  flagged healthy:", {name: round(evidence[name], 3) for name in EVIDENCE},
              sorted(flag for flag in FLAGS if evidence[flag]))


if __name__ == "__main__":
    main()
