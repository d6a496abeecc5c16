"""A sweep on a real two-node Ray cluster on this machine, joined with token authentication, whose
cells must land on the worker: the worker's raylet killed mid-sweep, then a new worker and
`--resume`. Loopback addresses only (head 127.0.0.2, worker 127.0.0.3: Ray rewrites 127.0.0.1 to the
machine's routable address), the token in a file of the test's own (never ~/.ray/auth_token), and
every Ray process of the test stopped by its process group, then by its temp dir."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.analysis.run import Run
from harness.sweep.sweepdir import SweepDir
from tests.e2e.conftest import LiveServer

pytestmark = pytest.mark.e2e
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
# About 1 s a request here: a cell still runs for 5 s after its first record, and a task outlives
# its killed raylet by about 1 s (Ray's workers look for their raylet once a second).
PROMPTS = 6
DEADLINE_S = 5
UNPLACED = ("Ray could not place the cell's task: no live node has CPU=1, workernode=1 "
            f"(waited {DEADLINE_S} s, ray.placement_timeout_s)")
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _until(condition, what: str, timeout_s: float = 120.0, process: subprocess.Popen | None = None):
    """Wait for an observable event (`condition()` true), failing on the overall timeout, or at once
    when `process` (whose output it needs) has ended first."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        assert process is None or process.poll() is None, f"{what}: the process ended ({process.returncode}) first"
        time.sleep(0.1)
    raise AssertionError(f"{what}: not seen within {timeout_s:g} s")


class Cluster:
    """Ray nodes started with `ray start --block`, each in a process group of its own."""

    def __init__(self, root: Path) -> None:
        self.root, self.port, self.nodes = root, _free_port(), []
        token = root / "token"
        token.write_text(os.urandom(32).hex())
        token.chmod(0o600)
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
                    "RAY_USAGE_STATS_ENABLED": "0"}

    @property
    def address(self) -> str:
        return f"{HEAD_IP}:{self.port}"

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = self.root / f"{name}.log"
        with log.open("w") as out:
            node = subprocess.Popen([RAY, "start", "--disable-usage-stats", "--dashboard-agent-listen-port", "0",
                                     "--block", *args], env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.nodes.append(node)
        _until(lambda: "block forever" in log.read_text(), f"Ray node {name} up", 90, node)
        return node

    def head(self) -> subprocess.Popen:
        # a dead worker is declared within about 5 s (Ray's default: 15 s)
        fast_health_check = {**self.env, "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5"}
        return self.start("head", "--head", "--node-ip-address", HEAD_IP, "--port", str(self.port), "--num-cpus", "1",
                          "--resources", '{"headnode": 1}', "--include-dashboard", "false",
                          "--temp-dir", str(self.root / "ray"), env=fast_health_check)

    def worker(self, name: str) -> subprocess.Popen:
        return self.start(name, "--address", self.address, "--node-ip-address", WORKER_IP, "--num-cpus", "1",
                          "--resources", '{"workernode": 1}')

    def stop(self) -> None:
        for node in reversed(self.nodes):
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGTERM)
        for node in self.nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
        left = subprocess.run(["pgrep", "-f", str(self.root)], capture_output=True, text=True).stdout.split()
        for pid in left:  # a process that left its group still names the temp dir
            os.kill(int(pid), signal.SIGKILL)


def raylet_of(node: subprocess.Popen) -> tuple[int, str]:
    """The pid and Ray node id of a node's raylet, from its command line."""
    pid = int(_until(lambda: subprocess.run(["pgrep", "-P", str(node.pid), "-x", "raylet"], capture_output=True,
                                            text=True).stdout.split()[:1], "the worker's raylet")[0])
    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return pid, next(arg.split("=", 1)[1] for arg in args if arg.startswith("--node_id="))


@contextmanager
def two_node_cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="sb-ray-"))  # short: Ray's socket paths must fit 107 bytes
    cluster = Cluster(root)
    try:
        cluster.head()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _sweep_config(server: LiveServer, cluster: Cluster, results: Path) -> Path:
    """Two cells (one configuration per spelling of the server's address: not chained, so they
    wait for the worker's one `workernode`), each PROMPTS requests of 256 tokens."""
    port = server.base_url.rsplit(":", 1)[1]
    config = results.parent / "sweep.yaml"
    config.write_text(
        f"name: two-nodes\nresults: {results}\nconcurrency: [1]\nwarmup: 0\n"
        f"configurations:\n  - {{name: a, server: 'http://127.0.0.1:{port}'}}\n"
        f"  - {{name: b, server: 'http://localhost:{port}'}}\n"
        "workloads:\n  - name: synthetic\n    options: {num_prompts: " + str(PROMPTS) + ", input_tokens: 32, "
        f"output_tokens: 256, tokenizer: '{server.model_dir}'}}\n"
        f"ray: {{address: '{cluster.address}', num_cpus: 1, resources: {{workernode: 1}}, "
        f"placement_timeout_s: {DEADLINE_S}}}\n")
    return config


def _records(results: Path) -> dict[str, int]:
    """cell id -> how many request records its run has written so far (whole lines)."""
    return {path.parents[1].name: path.read_text().count("\n") for path in results.glob("*/cells/*/*/requests.jsonl")}


def _sweep(args: list[str], cluster: Cluster, log: Path) -> subprocess.Popen:
    """`sparkbench sweep ARGS` as a user runs it on the head, its output in `log`.out and .err (files:
    Ray's log lines could fill a pipe while the test waits)."""
    with log.with_suffix(".out").open("w") as out, log.with_suffix(".err").open("w") as err:
        return subprocess.Popen([sys.executable, "-m", "harness.cli", "sweep", *args], env=cluster.env,
                                stdout=out, stderr=err, text=True)


def _ended(sweep: subprocess.Popen, log: Path, timeout_s: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a sweep that must end within `timeout_s`."""
    code = sweep.wait(timeout=timeout_s)
    return code, log.with_suffix(".out").read_text(), log.with_suffix(".err").read_text()


def test_cells_land_on_the_worker_a_dead_worker_ends_the_sweep_and_resume_completes_it(sglang_server: LiveServer,
                                                                                       tmp_path):
    pytest.importorskip("ray")
    results = tmp_path / "results"
    with two_node_cluster() as cluster:
        first_worker = cluster.worker("worker-1")
        raylet, first_node_id = raylet_of(first_worker)
        sweep = _sweep(["--config", str(_sweep_config(sglang_server, cluster, results))], cluster, tmp_path / "first")
        running = _until(lambda: [cell for cell, rows in _records(results).items() if rows], "a cell's first record",
                         process=sweep)
        os.kill(raylet, signal.SIGKILL)
        code, out, err = _ended(sweep, tmp_path / "first", 120)  # the deadline ends it: bounded
        assert code == 1, err
        first_worker.wait(timeout=30)
        [killed] = running
        waiting = next(cell for cell in ("a.synthetic.c1", "b.synthetic.c1") if cell != killed)
        folder = SweepDir.load(next(results.iterdir()))
        cells = folder.record.cells
        assert cells[killed].status == "failed" and cells[killed].error.startswith("Ray task: ")
        assert f"Node IP: {WORKER_IP}" in cells[killed].error and first_node_id in cells[killed].error
        assert (cells[waiting].status, cells[waiting].error, cells[waiting].run_dir) == ("failed", UNPLACED, None)
        assert out.splitlines()[-1] == (f"sweep: 2 of 2 cells did not complete; continue with: "
                                        f"sparkbench sweep --resume {folder.path}")

        _, second_node_id = raylet_of(cluster.worker("worker-2"))
        code, out, err = _ended(_sweep(["--resume", str(folder.path)], cluster, tmp_path / "resume"), tmp_path / "resume",
                                180)
        assert code == 0, err
    folder = SweepDir.load(folder.path)
    cells = folder.record.cells
    assert {cell.status for cell in cells.values()} == {"complete"}
    assert {(cell.node.ray_node_id, cell.node.ip, cell.node.hostname) for cell in cells.values()} == \
        {(second_node_id, WORKER_IP, socket.gethostname())}
    assert second_node_id != first_node_id
    for cell_id in cells:
        run = Run.load(folder.run_dirs()[cell_id])
        ok = run.requests[run.requests["status"] == "ok"]
        assert sorted(ok["prompt_id"]) == sorted(set(ok["prompt_id"])) and len(ok) == PROMPTS  # each once
    assert len(Run.load(folder.run_dirs()[killed]).manifest["resumed"]) == 1  # continued, not run afresh
