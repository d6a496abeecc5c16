"""The error type whose message is shown to the user as one line."""

import errno


class SparkbenchError(Exception):
    """A problem the user can act on; the CLI prints `sparkbench: <message>` and exits non-zero."""

    exit_code = 2


def describe_os_error(exc: BaseException) -> str:
    """The cause of a failed write in words a user acts on: a full disk is "disk full", not the
    error of whichever library happened to be writing."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return f"disk full ({seen.filename or 'no space left on device'})"
        if isinstance(seen, OSError) and seen.strerror:
            return f"{seen.strerror} ({seen.filename})" if seen.filename else seen.strerror
        seen = seen.__cause__ or seen.__context__
    return f"{type(exc).__name__}: {exc}"
