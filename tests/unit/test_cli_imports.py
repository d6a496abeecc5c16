"""The command line imports only what a command needs: help loads no table or array library, and
neither help nor a run loads the plotting or statistical-testing libraries (each of them costs
tenths of a second and tens of MB of start-up on a 2-core host).

Each check runs in a fresh interpreter and reads its `sys.modules`: the test process itself has
imported everything long before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import click
import typer.main

# Drawing (matplotlib and pandas' bridge to it) and testing (scipy): only `report`, `compare`,
# `agree` and the like need them, and they import them when they run.
HEAVY = ("matplotlib", "scipy", "pandas.plotting._matplotlib", "PIL", "datasets", "ray")
# Tables and arrays: a run writes and reads them, the help has nothing to compute.
TABLES = ("pandas", "numpy", "pyarrow")


def loaded_after(code: str, watched: tuple[str, ...] = HEAVY) -> set[str]:
    """The `watched` modules loaded once `code` has run in a fresh interpreter (`app`: the command line)."""
    probe = (f"import json, sys\nfrom harness.cli import app\n{code}\n"
             f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def every_help() -> list[list[str]]:
    """The `--help` of the command line and of every group and command under it."""
    from harness.cli import app

    def under(command: click.Command, path: list[str]) -> Iterator[list[str]]:
        yield [*path, "--help"]
        for name, sub in getattr(command, "commands", {}).items():
            yield from under(sub, [*path, name])

    return list(under(typer.main.get_command(app), []))


def test_importing_the_command_line_and_building_every_help_loads_no_heavy_module():
    helps = every_help()
    assert ["run", "synthetic", "--help"] in helps and ["capacity", "synthetic", "--help"] in helps
    build_them = f"for args in {helps!r}:\n    assert app(args, standalone_mode=False) == 0"
    assert loaded_after(build_them, HEAVY + TABLES) == set()


def test_a_run_command_parsed_to_its_request_loads_no_heavy_module():
    # Parsed, validated into a RunRequest and refused there (more prompt tokens than a run holds),
    # before any server is asked: the whole path from argv to the run spine.
    code = ("from harness.errors import SparkbenchError\n"
            "try:\n    app(['run', 'synthetic', '--server', 'http://127.0.0.1:9', '--num-prompts', '100000',"
            " '--input-tokens', '1000'], standalone_mode=False)\n"
            "except SparkbenchError as exc:\n    assert 'prompt tokens' in str(exc), exc\n"
            "else:\n    raise AssertionError('the request was not refused')")
    assert loaded_after(code) == set()


def test_a_whole_run_against_a_fake_server_loads_neither_plotting_nor_testing(tmp_path):
    code = ("from tests.fakes.stream_server import Script, serving\n"
            "with serving(Script()) as url:\n"
            "    assert app(['run', 'gsm8k', '--limit', '2', '--max-new-tokens', '8', '--warmup', '1', '--no-progress',"
            f" '--server', url, '--results', {str(tmp_path)!r}], standalone_mode=False) in (0, None)")
    assert loaded_after(code) == set()
    assert len(list(tmp_path.glob("*/requests.parquet"))) == 1  # the run did run, to its tables
