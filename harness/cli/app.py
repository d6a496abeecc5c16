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


# typer turns a KeyboardInterrupt inside a command into this exit code, silently: read as Ctrl-C.
TYPER_INTERRUPTED = 130


def _terminate_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run like Ctrl-C: records kept, servers stopped


def usage_line(exc: typer.TyperException) -> str:
    """A flag or argument the command line cannot take, as one line naming the command's help."""
    message = "; ".join(line.strip() for line in exc.format_message().splitlines() if line.strip())
    context = getattr(exc, "ctx", None)
    return f"{message} (see '{context.command_path} --help')" if context else message


def asks_for_help(exc: typer.TyperException) -> bool:
    """`sparkbench` or `sparkbench run` alone: the parser raises the command's help as its error."""
    context = getattr(exc, "ctx", None)
    return context is not None and exc.format_message() == context.get_help()


def main() -> None:
    try:
        _main()
    finally:
        _forget_caught_interrupts()


def _forget_caught_interrupts() -> None:
    """CPython marks a KeyboardInterrupt that leaves a string `eval` as unhandled even when a caller
    catches it (typer evaluates the commands' string annotations, so a Ctrl-C lands there now and
    then), and `python -m harness.cli` then ends by SIGINT whatever its exit code and its one line
    said. The mark is cleared as every string `eval` starts; one more clears it."""
    eval("None")


def _main() -> None:
    try:  # the handlers are swapped inside: a Ctrl-C that lands between the two is caught below too
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is KeyboardInterrupt from here on
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
        # Not standalone: the parser's usage errors reach us, so they print as one line like every other.
        outcome = app(standalone_mode=False)
    except typer.TyperException as exc:
        print(exc.format_message() if asks_for_help(exc) else f"sparkbench: {redact(usage_line(exc))}",
              file=sys.stderr)
        sys.exit(SparkbenchError.exit_code)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C before a command's own handling of it (a run's)
        print("sparkbench: interrupted", file=sys.stderr)
        sys.exit(1)
    except SparkbenchError as exc:
        print(f"sparkbench: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file the user named cannot be read or written: say which and why
        print(f"sparkbench: {redact(describe_os_error(exc))}", file=sys.stderr)
        sys.exit(SparkbenchError.exit_code)
    if outcome == TYPER_INTERRUPTED:  # Ctrl-C inside a command, before its own handling of it
        print("sparkbench: interrupted", file=sys.stderr)
        sys.exit(1)
    sys.exit(outcome if isinstance(outcome, int) else 0)  # a command's typer.Exit code, else done
