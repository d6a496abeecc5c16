"""Credentials: where an API key comes from, and keeping every secret out of what is written.

A password in a server URL (`http://user:pass@host`) is used for the requests (httpx sends it as
basic auth) and shown nowhere: manifests, reports and error lines go through `redact`. An API key
is sent as `Authorization: Bearer ...` and never written at all.
"""

from __future__ import annotations

import os
import re

API_KEY_VARIABLES = ("SPARKBENCH_API_KEY", "OPENAI_API_KEY")  # first one set wins
API_KEY_FLAG = "--api-key"
MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"']+@")


def api_key(explicit: str | None = None) -> str | None:
    """The key given on the command line, else from the environment (API_KEY_VARIABLES), else None."""
    if explicit:
        return explicit
    return next((os.environ[name] for name in API_KEY_VARIABLES if os.environ.get(name)), None)


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def redact(text: str) -> str:
    """`text` with the user and password of every URL replaced by MASK."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line fit to be written: the value of --api-key masked, URLs redacted."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == API_KEY_FLAG:
            arg = MASK
        elif arg.startswith(API_KEY_FLAG + "="):
            arg = f"{API_KEY_FLAG}={MASK}"
        out.append(redact(arg))
    return out
