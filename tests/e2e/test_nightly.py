"""The nightly job against real servers: no false alarm under load, two jobs sharing one state folder,
a real slowdown confirmed, a busy host giving inconclusive, a dead server.

Every night declares this test process as the setup (SPARKBENCH_NIGHTLY_SETUP_PIDS): the servers the
suite started and the other night are its descendants, so their load is not foreign. Load from
anything else on the host (scripts/burst_load.py) is foreign: a night then says inconclusive, never
regression, and a pin forced past the busy rule (`NEVER_BUSY`) may be taken during a burst, so the
slowdown the nights must confirm is large enough that no burst under its baseline can hide it."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
import pytest
import yaml

from harness.nightly.foreign import SETUP_PIDS_ENV
from harness.nightly.history import read_history
from harness.run.hostload import listening_pid, process_tree
from tests.e2e.conftest import HANG_GUARD_S

# Two runs of the same configuration on this 2-core test bed (client and server share the cores)
# were seen 25% apart in decode throughput; the test config therefore gates at 50% (TTFT, a few
# tens of ms here, at 100%) so that only a real change trips it. A deployment states its own.
LOOSE = {"decode_throughput_aggregate": 0.5, "tpot_ms": 0.5, "ttft_ms": 1.0, "e2e_ms": 0.5,
         "accept_length_token_weighted": 0.1}
# Exit codes: whatever load other work puts on the host, the same configuration may only give
# pass or inconclusive, never regression.
PASS, REGRESSION, INCONCLUSIVE = 0, 1, 3
NEVER_BUSY = {"foreign_cpu_share": 100.0, "steal_share": 1.0, "tpot_client_server_gap": 100.0}
ALWAYS_BUSY = {"foreign_cpu_share": -1.0}  # any readable share is above it
FEW = {"min_requests": 4}


def write_config(folder: Path, server: str, workloads: list[dict], name: str = "nightly", **extra) -> Path:
    """A night's config; one baseline run (no noise repeats), to keep the tier short."""
    config = {"server": server, "state_dir": str(folder / "state"), "workloads": workloads,
              "thresholds": LOOSE, "baseline_repeats": 1, **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def nightly(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "nightly", "--config", str(config), *extra],
                          capture_output=True, text=True, timeout=HANG_GUARD_S,
                          env={**os.environ, SETUP_PIDS_ENV: f"{os.environ.get(SETUP_PIDS_ENV, '')} {os.getpid()}"})


def synthetic(model_dir: Path, prompts: int = 4, output_tokens: int = 64, input_tokens: int = 512) -> dict:
    return {"name": "synthetic", "options": {"num_prompts": prompts, "input_tokens": input_tokens,
                                             "output_tokens": output_tokens, "seed": 0, "tokenizer": str(model_dir)}}


@pytest.fixture(scope="module")
def nights(sglang_server, tmp_path_factory):
    """Three nights against the same server and configuration: the first pins the baseline, the
    other two run AT ONCE on the same state folder (and load the host for each other)."""
    folder = tmp_path_factory.mktemp("nightly")
    workloads = [synthetic(sglang_server.model_dir), {"name": "gsm8k", "options": {"limit": 6, "max_new_tokens": 24}}]
    # These nights check the profile but not the stream: on a host loaded from outside the suite (load
    # 13 on 2 cores) the guard's canary was held back in all its attempts and every night refused.
    config = write_config(folder, sglang_server.base_url, workloads, profile="cpu-testbed", allow_buffered=True)
    # The pin is judged as on a quiet host: this tier loads its host on purpose, and a pin judged
    # busy pins nothing (tests/unit/test_nightly_job.py).
    first = nightly(write_config(folder, sglang_server.base_url, workloads, name="pin", profile="cpu-testbed",
                                 busy_limits=NEVER_BUSY, allow_buffered=True))
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(nightly, [config, config]))
    return folder / "state", [first, *both]


def test_the_first_night_pins_the_baseline(nights):
    state, results = nights
    assert results[0].returncode == 0, results[0].stderr
    assert "verdict: pinned synthetic, gsm8k" in results[0].stdout and "host load per run" in results[0].stdout
    assert (state / "baseline.json").exists()


def test_the_same_configuration_again_is_no_alarm(nights):
    _, results = nights
    for done in results[1:]:
        assert done.returncode in (PASS, INCONCLUSIVE), done.stdout + done.stderr
        assert "verdict: pass" in done.stdout or "verdict: INCONCLUSIVE" in done.stdout
        assert "gsm8k_accuracy_strict" in done.stdout and "decode_throughput_aggregate" in done.stdout
        assert "host load per run" in done.stdout


def test_two_nights_at_once_keep_every_row_and_their_own_report(nights):
    state, _ = nights
    history = read_history(state)
    per_night = history[history["role"] != "night"].groupby("night")["run_id"].nunique()
    assert len(per_night) == 2  # nights 2 and 3, distinct ids although they started together
    verdicts = history[history["metric"] == "night_verdict"]
    assert sorted(verdicts["night"]) == sorted(per_night.index)
    first_pass = history[(history["role"] == "candidate") & history["metric"].str.startswith("host_")]
    assert first_pass.groupby("night").size().tolist() == [10, 10]  # 5 load figures x 2 workloads each
    everyone = sorted((state / "reports").iterdir())
    reports = [r for r in everyone if r.name in per_night.index]
    assert len(reports) == 2 and len(everyone) == 3  # and the pin's own, with its host-load table
    assert (everyone[0] / "host_load.csv").exists()
    for report in reports:
        assert (report / "nightly_trend.png").stat().st_size > 0
        assert (report / "report.html").exists()
        assert set(pd.read_csv(report / "verdicts.csv")["workload"]) == {"synthetic", "gsm8k"}


def test_no_process_of_the_suite_or_the_server_is_counted_as_foreign(nights, sglang_server):
    state, _ = nights
    ours = process_tree(os.getpid()) | process_tree(listening_pid(urlsplit(sglang_server.base_url).port) or -1)
    for report in (state / "reports").iterdir():
        named = pd.read_csv(report / "host_load.csv", keep_default_na=False)["foreign"]
        pids = {int(entry.split()[0]) for cell in named if cell != "none" for entry in cell.split(", ")
                if not entry.startswith("unseen")}
        assert not pids & ours, named.tolist()


def test_uncertified_p95_is_reported_but_not_gated(nights):
    state, _ = nights
    verdicts = pd.read_csv(sorted((state / "reports").iterdir())[-1] / "verdicts.csv")
    e2e = verdicts[verdicts["metric"] == "e2e_ms"].set_index(["workload", "stat"])["verdict"]
    assert e2e[("synthetic", "p95")] == "ungated: p95 needs 130 requests, has 4"
    assert e2e[("synthetic", "mean")] == "ungated: mean needs 20 requests, has 4"  # nor is a mean of 4


@pytest.fixture(scope="module")
def slowdown(sglang_server, tmp_path_factory):
    """A baseline pinned at 2 output tokens of a 64-token prompt; the nights then ask for 192 of the
    same prompts on the same server, so each request takes dozens of times as long (e2e latency): a
    request of the night decodes 96 times the baseline's tokens, so foreign load would have to slow
    the baseline's run some fifty-fold to hide it (a pin taken while other jobs held both cores was
    seen 4-7 times slower, and 16 against 160 tokens then left the change's interval touching zero).
    So large a change needs no 20 requests to be seen: these nights gate means of 4 (`FEW`)."""
    folder = tmp_path_factory.mktemp("slowdown")
    pin = nightly(write_config(folder, sglang_server.base_url, [synthetic(sglang_server.model_dir, output_tokens=2, input_tokens=64)],
                               name="pin", busy_limits=NEVER_BUSY))
    assert pin.returncode == PASS, pin.stdout + pin.stderr
    return folder, [synthetic(sglang_server.model_dir, output_tokens=192, input_tokens=64)]


def latest_verdicts(folder: Path) -> pd.DataFrame:
    return pd.read_csv(sorted((folder / "state" / "reports").iterdir())[-1] / "verdicts.csv")


def test_a_real_slowdown_is_confirmed_by_a_rerun_and_alarms(slowdown, sglang_server):
    folder, workloads = slowdown
    done = nightly(write_config(folder, sglang_server.base_url, workloads, name="quiet", busy_limits=NEVER_BUSY, **FEW))
    assert done.returncode == REGRESSION, done.stdout + done.stderr
    assert "verdict: REGRESSION" in done.stdout and "synthetic:e2e_ms mean regressed (confirmed)" in done.stdout
    e2e = latest_verdicts(folder).set_index(["metric", "stat"]).loc[("e2e_ms", "mean")]
    assert e2e["confirmation"].startswith("regressed (+")


def test_a_slowdown_seen_only_on_a_busy_host_is_inconclusive(slowdown, sglang_server):
    folder, workloads = slowdown
    config = write_config(folder, sglang_server.base_url, workloads, name="busy", busy_limits=ALWAYS_BUSY,
                          confirmations=2, **FEW)
    done = nightly(config)
    assert done.returncode == INCONCLUSIVE, done.stdout + done.stderr
    assert "verdict: INCONCLUSIVE" in done.stdout and "foreign processes took" in done.stdout
    e2e = latest_verdicts(folder).set_index(["metric", "stat"]).loc[("e2e_ms", "mean")]
    assert e2e["verdict"] == "inconclusive (host busy)" and e2e["confirmation"].count("on a busy host") == 2


def test_a_server_that_is_down_gives_exit_2(tmp_path):
    config = write_config(tmp_path, "http://127.0.0.1:9", [synthetic(tmp_path)])
    done = nightly(config)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("sparkbench nightly: could not run: cannot reach http://127.0.0.1:9")
