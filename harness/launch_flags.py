"""Reading a server's launch command line: the one rule every reader follows.

A flag's value is `--flag VALUE` or `--flag=VALUE`; a flag given more than once takes its last
value, as argparse does (SGLang's and vLLM's parsers) and as llama.cpp's own parser does.
"""

from __future__ import annotations

from collections.abc import Sequence


def flag_value(args: Sequence[str], *flags: str) -> str | None:
    """The value the launch arguments `args` give any of `flags` (their aliases), else None."""
    value = None
    for index, arg in enumerate(args):
        for flag in flags:
            if arg == flag and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(flag + "="):
                value = arg.split("=", 1)[1]
    return value
