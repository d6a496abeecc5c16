"""Record the llama.cpp answers that the unit tests replay (tests/fixtures/llamacpp_*).

    python scripts/record_llamacpp_fixtures.py OUT_DIR TAG

Starts the test bed's `llamacpp-cpu` and `llamacpp-cpu-draft` profiles in turn and saves, from
each fresh server: the raw `/completion` stream of one greedy 32-token request on the prompt ids
5, 6, 7, then `GET /props` and `GET /slots`; from the draft server also `GET /metrics`. Files are named
`llamacpp_<pin>_<TAG>_*` (TAG says where they were recorded, e.g. cpu).
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from harness.run.embedded import embedded_server
from harness.testbed.llamacpp import SDIST_VERSION

REQUEST = {"prompt": [5, 6, 7], "stream": True, "n_predict": 32, "temperature": 0.0, "top_p": 1.0, "top_k": -1,
           "min_p": 0.0, "ignore_eos": True, "stop": [], "return_tokens": True}


def record(profile: str, label: str, prefix: Path, with_metrics: bool) -> None:
    with embedded_server(profile, log_name=f"record-{label}") as server:
        with httpx.Client(timeout=120.0) as http:
            with http.stream("POST", server.base_url + "/completion", json=REQUEST) as resp:
                body = resp.read()
            (prefix.parent / f"{prefix.name}completion_{label}.sse").write_bytes(body)
            for route in ("props", "slots"):
                answer = http.get(f"{server.base_url}/{route}").text
                (prefix.parent / f"{prefix.name}{route}_{label}.json").write_text(answer)
            if with_metrics:
                (prefix.parent / f"{prefix.name}metrics_{label}.prom").write_text(http.get(server.base_url + "/metrics").text)


def main(out_dir: str, tag: str) -> None:
    prefix = Path(out_dir) / f"llamacpp_{SDIST_VERSION}_{tag}_"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    record("llamacpp-cpu", "plain", prefix, with_metrics=False)
    record("llamacpp-cpu-draft", "draft", prefix, with_metrics=True)
    print(f"recorded {prefix}*")


if __name__ == "__main__":
    main(*sys.argv[1:])
