"""The `sparkbench` application object and its entry point; the commands register on it."""

from __future__ import annotations

import signal
import sys

import typer

from harness.errors import SparkbenchError, describe_os_error
from harness.secrets import redact

app = typer.Typer(help="Decode-speed and accuracy benchmarks for LLM inference servers.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  rich_markup_mode=None)  # plain click output: errors are short, help is greppable
run_app = typer.Typer(help="Run a workload against a server and record every request.", no_args_is_help=True,
                      rich_markup_mode=None)
app.add_typer(run_app, name="run")


def _terminate_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run like Ctrl-C: records kept, servers stopped


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        app()
    except SparkbenchError as exc:
        print(f"sparkbench: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file the user named cannot be read or written: say which and why
        print(f"sparkbench: {redact(describe_os_error(exc))}", file=sys.stderr)
        sys.exit(SparkbenchError.exit_code)
