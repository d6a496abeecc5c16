"""The command line's surface: help on every subcommand, bad flags and bad input as short errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from harness.cli import app

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

COMMANDS = [["run", "synthetic"], ["run", "gsm8k"], ["summarize"], ["compare"], ["report"], ["profiles"],
            ["serve"], ["check"], ["nightly"], ["agree"], ["sweep"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_subcommand_has_help(command):
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.output and "--help" in result.output


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "said"), [
    (["run", "synthetic", "--num-prompts", "0"], "sparkbench: Invalid value for '--num-prompts'"),
    (["run", "synthetic", "--concurrency", "many"], "sparkbench: Invalid value for '--concurrency'"),
    (["run", "synthetic", "--no-such-flag"], "sparkbench: No such option: --no-such-flag"),
    (["run", "nothing"], "sparkbench: No such command 'nothing'"),
    (["report", "--latest"], "sparkbench: Option '--latest' requires an argument"),
])
def test_a_bad_flag_is_one_line(args, said):
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(said), done.stderr


@pytest.mark.parametrize("args", [[], ["run"]], ids=["sparkbench", "run"])
def test_a_command_group_alone_prints_its_help(args):
    done = _cli(*args)
    assert done.returncode == 2 and done.stderr.startswith("Usage: ")


def test_a_folder_that_is_no_run_is_one_line(tmp_path):
    done = _cli("summarize", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == f"sparkbench: {tmp_path}: no manifest.json; is this a run directory?"


def test_an_unknown_profile_is_one_line():
    done = _cli("check", "--profile", "nope", "--server", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "unknown profile 'nope'" in done.stderr


def test_a_bad_label_is_one_line_before_any_server_starts():
    done = _cli("run", "gsm8k", "--server", "http://127.0.0.1:9", "--label", "two\nlines")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["sparkbench: --label 'two\\nlines': give one line of 1 to 80 characters"]
