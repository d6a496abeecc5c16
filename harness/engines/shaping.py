"""Request shaping: headers of the user's own (`--header NAME:VALUE`), sent with every request to
the server (detection, facts, streams, scrapes), and the engine's own request fields
(`--extra-body JSON`), sent with every streamed request.

An extra body is merged into the body the client builds: objects merge key by key (SGLang's
`sampling_params` takes a `min_p` beside the workload's sampling), and a field the client sets
itself (the prompt, the stream, a sampling parameter the workload states) is refused, because the
record would then say one thing and the server be asked another. A header the HTTP framing needs
(`Host`, `Content-Length`, ...) is refused the same way.
"""

from __future__ import annotations

import re
from typing import Any

from harness.errors import SparkbenchError
from harness.secrets import checked_credential, header_parts

# Set by the transport itself: a header of the user's own with one of these names would break the framing.
FRAMING_HEADERS = frozenset({"host", "content-length", "content-type", "accept", "transfer-encoding", "connection"})
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name (RFC 9110 token)


class ExtraBodyClash(SparkbenchError):
    """An extra body field the client already sets."""


def checked_header(header: str) -> str:
    """`header` as `NAME: VALUE` when it is one the transport may send; ValueError naming the problem."""
    if ":" not in header:
        raise ValueError(f"header {header.partition('=')[0][:40]!r} is not NAME:VALUE")
    name, value = header_parts(header)
    if not TOKEN.fullmatch(name):
        raise ValueError(f"header name {name[:40]!r} is not an HTTP header name")
    if name.lower() in FRAMING_HEADERS:
        raise ValueError(f"header {name} is set by the transport itself")
    if any(char in value for char in "\r\n\0"):
        raise ValueError(f"header {name}: its value holds a line break or NUL")
    try:
        checked_credential(value, f"header {name}: its value")
    except SparkbenchError as exc:
        raise ValueError(str(exc)) from None
    return f"{name}: {value}"


def with_extra_body(body: dict[str, Any], extra: dict[str, Any] | None, at: str = "") -> dict[str, Any]:
    """`body` with `extra` merged in (objects key by key); ExtraBodyClash naming the first field
    that `body` already sets."""
    if not extra:
        return body
    merged = dict(body)
    for key, value in extra.items():
        where = f"{at}{key}"
        if key not in merged:
            merged[key] = value
        elif isinstance(merged[key], dict) and isinstance(value, dict):
            merged[key] = with_extra_body(merged[key], value, f"{where}.")
        else:
            raise ExtraBodyClash(f"--extra-body sets {where}, which sparkbench sends itself (the prompt, the "
                                 "stream or the workload's sampling); set it through the workload's options")
    return merged
