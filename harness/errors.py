"""The error type whose message is shown to the user as one line."""


class SparkbenchError(Exception):
    """A problem the user can act on; the CLI prints `sparkbench: <message>` and exits non-zero."""

    exit_code = 2
