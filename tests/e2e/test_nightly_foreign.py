"""The nightly's busy rule against a real llama.cpp server: a pin beside a busy foreign process is
refused and names it; the load of the test suite (declared as the setup), of the measured server and
of the night itself is never counted as foreign. Each test holds whatever else runs on the host:
other work only adds foreign load, which is named and, past the limit, refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
import yaml

from harness.nightly.foreign import SETUP_PIDS_ENV
from harness.run.hostload import listening_pid, process_tree
from tests.e2e.conftest import HANG_GUARD_S

PASS, INCONCLUSIVE = 0, 3
SPIN = "import time\nwhile True: pass"


def _pin(folder: Path, server, setup: list[int]) -> subprocess.CompletedProcess:
    """A pin (one baseline run, no noise repeats) of a small synthetic run under the default busy
    rule, with `setup` declared as the setup's process trees."""
    workload = {"name": "synthetic", "options": {"num_prompts": 4, "input_tokens": 128, "output_tokens": 32,
                                                 "seed": 0, "tokenizer": str(server.model_dir)}}
    config = folder / "pin.yaml"
    config.write_text(yaml.safe_dump({"server": server.base_url, "state_dir": str(folder / "state"),
                                      "workloads": [workload], "baseline_repeats": 1}), encoding="utf-8")
    inherited = os.environ.get(SETUP_PIDS_ENV, "")  # make test's own tiers (scripts/test_tiers.py)
    env = {**os.environ, SETUP_PIDS_ENV: " ".join([inherited, *map(str, setup)]).strip()}
    return subprocess.run([sys.executable, "-m", "harness.cli", "nightly", "--config", str(config)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)


def _detached_spinners(count: int) -> list[int]:
    """`count` busy loops started by a shell that exits at once: descendants of no test process."""
    shell = subprocess.run(["sh", "-c", " ".join([f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!;'] * count),
                            SPIN], capture_output=True, text=True, check=True)
    return [int(pid) for pid in shell.stdout.split()]


def _host_load(folder: Path) -> tuple[pd.DataFrame, dict]:
    """The pin's host-load table and its run's recorded host load."""
    report = next((folder / "state" / "reports").iterdir())
    run = next((folder / "state" / "runs").iterdir())
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    return pd.read_csv(report / "host_load.csv", keep_default_na=False), manifest["host_load"]


def _named_pids(host_load: dict) -> set[int]:
    return {p["pid"] for p in host_load["foreign_processes"]}


def test_a_pin_beside_a_busy_foreign_process_pins_nothing_and_names_it(llamacpp_server, tmp_path):
    """A busy loop per core, started apart from the suite, the server and the night: the pin is
    refused (exit 3, the baseline as it was), and the run's record names them (the report shows the
    busiest eight foreign processes, which other work on the host may outrank)."""
    spinners = _detached_spinners(os.cpu_count() or 1)
    try:
        done = _pin(tmp_path, llamacpp_server, [os.getpid()])
    finally:
        for pid in spinners:
            os.kill(pid, signal.SIGKILL)
    assert done.returncode == INCONCLUSIVE, done.stdout + done.stderr
    assert "verdict: NOT PINNED, the host was busy" in done.stdout and "foreign processes took" in done.stdout
    assert not (tmp_path / "state" / "baseline.json").exists()
    table, load = _host_load(tmp_path)
    assert _named_pids(load) & set(spinners), load["foreign_processes"]
    assert table["foreign"].iloc[0] != "none" and load["foreign_cpu_share"] > 0.10


def test_the_suites_the_servers_and_the_nights_own_load_is_not_foreign(llamacpp_server, tmp_path):
    """A busy loop inside the suite's process tree (the declared setup) spins through the whole run:
    its CPU is the setup's, which the host's remainder past client and server (other_cpu_share)
    holds and the foreign share does not; no process of the suite, the server or the night is named
    foreign. Only foreign load (other work on the host) may make the pin refuse, and then it names
    only foreign processes. How much CPU the loop gets depends on the host, so no figure is compared
    with wall time."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        done = _pin(tmp_path, llamacpp_server, [os.getpid()])
        suite = process_tree(os.getpid())
        server = process_tree(listening_pid(urlsplit(llamacpp_server.base_url).port))
    finally:
        spinner.kill()
        spinner.wait()
    assert done.returncode in (PASS, INCONCLUSIVE), done.stdout + done.stderr
    _, load = _host_load(tmp_path)
    assert spinner.pid in suite and not _named_pids(load) & (suite | server), load["foreign_processes"]
    assert load["setup_cpu_s"] > 0  # the spinner, counted as the setup's
    assert load["other_cpu_share"] * load["cpus"] * load["wall_s"] >= 0.5 * load["setup_cpu_s"]
    assert load["server_cpu_s"] > 0 and load["client_cpu_s"] > 0
    # Other work on this host is foreign: it may refuse the pin, and is then the reason given.
    assert ("foreign processes took" in done.stdout) == (load["foreign_cpu_share"] > 0.10), done.stdout
    assert (done.returncode == PASS) == ("verdict: pinned synthetic" in done.stdout), done.stdout
