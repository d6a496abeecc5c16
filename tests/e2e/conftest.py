"""Real servers for the end-to-end tier, started once per test session (tests/e2e/servers.py).

Each server the collected tests use is a session fixture named in `SERVED`. The pool starts them
ahead of their first test, in the order the tests will want them, and stops each after the last
module that uses it. Set SPARKBENCH_SGLANG_URL (with SPARKBENCH_MODEL_DIR) to reuse a running
plain SGLang server while developing; CI leaves it unset.

Every e2e module's cost is tallied against tests/e2e/budget.toml (tests/e2e/budget.py) and printed
at the end.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pandas as pd
import pytest

from harness.testbed.envs import cache_root, ensure_model, server_logs_dir
from harness.testbed.variants import ensure_rounded_head_model
from tests.e2e.budget import Tally, cost_table, load_budget, over_budget
from tests.e2e.servers import LiveServer, Served, ServerPool

pytestmark = pytest.mark.e2e
__all__ = ["LiveServer"]

SERVED = {
    "sglang_server": Served("cpu-testbed"),
    "sglang_ngram_server": Served("cpu-testbed-ngram"),
    "sglang_standalone_server": Served("cpu-testbed-standalone"),
    "sglang_wrong_draft_server": Served("cpu-testbed-wrong-draft"),
    "sglang_reasoning_server": Served("cpu-testbed-reasoning"),
    "vllm_server": Served("vllm-cpu"),
    "vllm_ngram_server": Served("vllm-cpu-ngram"),
    "vllm_never_accept_server": Served("vllm-cpu-never-accept"),
    "llamacpp_server": Served("llamacpp-cpu"),
    "llamacpp_draft_server": Served("llamacpp-cpu-draft"),
    "llamacpp_synth2_server": Served("llamacpp-cpu-synth-2"),
    "llamacpp_synth3_server": Served("llamacpp-cpu-synth-3"),
    "llamacpp_near_one_server": Served("llamacpp-cpu-synth-near-one"),
    "real_sglang_server": Served("cpu-real"),
    "real_sglang_e4m3_head_server": Served("cpu-real", partial(ensure_rounded_head_model, "e4m3", real=True)),
    "real_sglang_e4m1_head_server": Served("cpu-real", partial(ensure_rounded_head_model, "e4m1", real=True)),
    "real_sglang_ngram_server": Served("cpu-real-ngram"),
    "real_sglang_standalone_server": Served("cpu-real-standalone"),
    "real_sglang_eagle3_server": Served("cpu-real-eagle3"),
    "real_vllm_server": Served("vllm-cpu-real"),
    "real_vllm_ngram_server": Served("vllm-cpu-real-ngram"),
    "real_llamacpp_server": Served("llamacpp-cpu-real"),
    "real_llamacpp_draft_server": Served("llamacpp-cpu-real-draft"),
    "real_llamacpp_ngram_server": Served("llamacpp-cpu-real-ngram"),
    "real_llamacpp_eagle3_server": Served("llamacpp-cpu-real-eagle3"),
}
POOL = pytest.StashKey[ServerPool]()
TALLY = pytest.StashKey[Tally]()
OVER_BUDGET = pytest.StashKey[list[str]]()


def _attached_sglang() -> LiveServer | None:
    url = os.environ.get("SPARKBENCH_SGLANG_URL")
    return LiveServer(url, Path(os.environ.get("SPARKBENCH_MODEL_DIR") or ensure_model())) if url else None


def servers_of(item: pytest.Item) -> set[str]:
    """The pooled servers a test asks for: its fixtures (with the ones they depend on) and the
    fixture names a parametrized fixture takes with `request.getfixturevalue`."""
    params = getattr(item, "callspec", None)
    named = {value for value in params.params.values() if isinstance(value, str)} if params else set()
    return (set(item.fixturenames) | named) & SERVED.keys()


def pool_plan(items: list[pytest.Item]) -> tuple[list[str], dict[str, str]]:
    """The servers in the order of their first test, and for each the test after which it stops: the
    last test of the last module that asks for it (a module's own fixtures may take a server in any
    of its tests, through `getfixturevalue`)."""
    order: dict[str, None] = {}
    last_module: dict[str, Path] = {}
    last_of_module = {item.path: item.nodeid for item in items}
    for item in items:
        for name in sorted(servers_of(item)):
            order.setdefault(name)
            last_module[name] = item.path
    return list(order), {name: last_of_module[path] for name, path in last_module.items()}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the engines of the pooled servers it uses (`pytest -m llamacpp`)."""
    for item in items:
        for engine in sorted({SERVED[name].engine for name in servers_of(item)}):
            item.add_marker(engine)


def pytest_configure(config: pytest.Config) -> None:
    """This tier's servers log into a folder of their own (its subprocesses inherit it), so the launch
    budget counts this session's launches, not those of a unit tier running beside it."""
    os.environ.setdefault("SPARKBENCH_SERVER_LOGS", str(cache_root() / "logs" / f"e2e-{os.getpid()}"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start, without waiting, the first servers that the collected tests will use."""
    if session.config.option.collectonly:
        return
    order, last_test = pool_plan(session.items)
    if _attached_sglang():
        order = [name for name in order if name != "sglang_server"]
        last_test.pop("sglang_server", None)
    pool = session.config.stash[POOL] = ServerPool(SERVED, order, last_test)
    session.config.stash[TALLY] = Tally(server_logs_dir())
    pool.start_ahead()


def _pool(config: pytest.Config) -> ServerPool:
    return config.stash[POOL]


def _is_e2e(item: pytest.Item) -> bool:
    return item.path.parent == Path(__file__).parent


def pytest_runtest_setup(item: pytest.Item) -> None:
    tally = item.config.stash.get(TALLY, None)
    if tally is not None and _is_e2e(item) and not tally.open:
        tally.begin(item.path.stem, _pool(item.config).generated())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield
    tally = item.config.stash.get(TALLY, None)
    if tally is None or not _is_e2e(item):
        return
    pool = _pool(item.config)
    if nextitem is None or nextitem.path != item.path:  # the module's own fixtures are torn down by now
        tally.end(pool.generated())
    pool.done(item.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    pool, tally = session.config.stash.get(POOL, None), session.config.stash.get(TALLY, None)
    if pool is not None:
        pool.close()
    if tally is not None and tally.costs:
        lines = session.config.stash[OVER_BUDGET] = over_budget(tally.costs, load_budget())
        if lines and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    tally = config.stash.get(TALLY, None)
    if tally is None or not tally.costs:
        return
    terminalreporter.section("end-to-end modules: cost against tests/e2e/budget.toml")
    for line in cost_table(tally.costs):
        terminalreporter.write_line(line)
    for line in config.stash.get(OVER_BUDGET, []):
        terminalreporter.write_line(f"OVER BUDGET {line}", red=True)


def _pooled(name: str):
    def server(request: pytest.FixtureRequest) -> LiveServer:
        return _pool(request.config).take(name)
    server.__doc__ = f"The session's {SERVED[name].profile} server (tests/e2e/servers.py)."
    return pytest.fixture(scope="session", name=name)(server)


for _name in SERVED.keys() - {"sglang_server"}:
    globals()[_name] = _pooled(_name)


@pytest.fixture(scope="session")
def sglang_server(request: pytest.FixtureRequest) -> LiveServer:
    """The session's plain SGLang test bed, or the server SPARKBENCH_SGLANG_URL names."""
    return _attached_sglang() or _pool(request.config).take("sglang_server")


@pytest.fixture(scope="session")
def llamacpp_synth_servers(llamacpp_synth2_server, llamacpp_synth3_server) -> dict[float, LiveServer]:
    """llama.cpp with synthetic acceptance at known mean accept lengths 2.0 and 3.0, by length."""
    return {2.0: llamacpp_synth2_server, 3.0: llamacpp_synth3_server}


# Only a hang guard, never a speed assertion: a loaded 2-core host has taken minutes for what an idle
# one does in seconds (the real model's gap design under other work passed 600 s), so the bound is
# far above any run a test makes and below CI's own limit.
HANG_GUARD_S = 3600


def sparkbench(*args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """Run the real command line, as a user would."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def synthetic_args(server: LiveServer, results: Path, prompts: int, input_tokens: int, output_tokens: int,
                   *extra: str) -> list[str]:
    """`sparkbench run synthetic` against `server` at a small shape."""
    return ["run", "synthetic", "--server", server.base_url, "--tokenizer", str(server.model_dir),
            "--num-prompts", str(prompts), "--input-tokens", str(input_tokens),
            "--output-tokens", str(output_tokens), "--results", str(results), "--no-progress", *extra]


def processes_serving_port(port: str) -> str:
    """Command lines of the processes started with `--port PORT` ('' when none is left)."""
    found = subprocess.run(["pgrep", "-a", "-f", "--", f"--port {port}( |$)"], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr  # 1: nothing matched; anything else: pgrep failed
    return found.stdout


def report_facts(run_dir: Path, out: Path) -> dict[str, str]:
    """`sparkbench report RUN_DIR` as a user runs it; the run's facts table in report.md, as
    {fact: value} with the Markdown escapes undone."""
    done = sparkbench("report", str(run_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    facts: dict[str, str] = {}
    for line in (out / "report.md").read_text(encoding="utf-8").splitlines():
        cells = [html.unescape(re.sub(r"\\(.)", r"\1", cell.strip())) for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 2:
            facts.setdefault(cells[0], cells[1])
    return facts


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def streamed(derived: pd.DataFrame) -> pd.DataFrame:
    """The requests the stream integrity rules left in (they keep their client stream timings)."""
    return derived[~derived["stream_flagged"].astype(bool)]
