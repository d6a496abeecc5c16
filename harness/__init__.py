"""sparkbench: decode-speed and accuracy benchmarks for LLM inference servers."""

import os
import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while the command line imports its modules: nothing has begun, so one line and out."""
    os.write(2, b"sparkbench: interrupted\n")
    os._exit(1)


def _the_command_line() -> bool:
    """Whether this process is the `sparkbench` command (the installed script, or `python -m harness.cli`)."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return os.path.basename(sys.argv[0]) == "sparkbench" or any(
        flag == "-m" and module == "harness.cli" for flag, module in zip(argv, argv[1:]))


# Ctrl-C during the command line's imports (a second or so) ends it in one line instead of an
# import's traceback; `harness.cli.app.main` hands SIGINT back to Python's own handler.
if _the_command_line():
    signal.signal(signal.SIGINT, _interrupted_while_starting)

from importlib.metadata import PackageNotFoundError, version  # noqa: E402

try:
    __version__ = version("sparkbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
