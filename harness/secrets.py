"""Credentials: where an API key comes from, and keeping every secret out of what is written.

A password in a server URL (`http://user:pass@host`) is used for the requests (sent as basic
auth) and shown nowhere; an API key is sent as `Authorization: Bearer ...` and never written. Every
text the harness writes (records, manifests, logs, reports, error lines) goes through `redact`,
which masks URL user info, `Bearer`/`Basic` credentials, and every secret this process was given
(`remember`), wherever a server may have echoed it.
"""

from __future__ import annotations

import base64
import os
from urllib.parse import unquote, urlsplit

import regex

API_KEY_VARIABLES = ("SPARKBENCH_API_KEY", "OPENAI_API_KEY")  # first one set wins
API_KEY_FLAG = "--api-key"
HEADER_FLAG = "--header"  # `NAME:VALUE`: the value may be a credential (a gateway's token), so it is masked
MASK = "***"
# A URL's user info: `scheme://userinfo@`, the scheme being the run of scheme characters from its
# first letter. A match may begin only where such a run begins (the lookbehind), and every
# quantifier is possessive, so no character is scanned more than twice: linear in the text, where
# a pattern free to start inside a run rescans it from every position (quadratic on a long word).
# The patterns are `regex`'s, not `re`'s: matched with `concurrent=True` they let go of the
# interpreter lock while they scan, so a signal is answered while the record writer's thread
# redacts a field of tens of MiB (`re` holds the lock for the whole pass).
_URL_USERINFO = regex.compile(
    r"(?<![A-Za-z0-9+.-])(?P<lead>[0-9+.-]*+)(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*+://)[^/@\s\"']++@")
_AUTH_VALUE = regex.compile(r"(?P<scheme>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", regex.IGNORECASE)
MIN_SECRET_CHARS = 8  # shorter values could match ordinary text (or an embedded figure); masked in URLs and headers only
_remembered: set[str] = set()


def remember(secret: str | None) -> None:
    """Mask `secret` in everything `redact` sees from now on, in this process."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        _remembered.add(secret)


def remember_url(url: str) -> None:
    """Remember the user info of `url` as it may be echoed: raw, decoded, and as basic auth."""
    try:
        userinfo = urlsplit(url).netloc.rpartition("@")[0]
    except ValueError:
        return
    if not userinfo:
        return
    decoded = unquote(userinfo)
    for secret in (userinfo, decoded, decoded.partition(":")[2], base64.b64encode(decoded.encode()).decode()):
        remember(secret)


def api_key(explicit: str | None = None) -> str | None:
    """The key given on the command line, else from the environment (API_KEY_VARIABLES), else None;
    remembered for `redact`."""
    key = explicit or next((os.environ[name] for name in API_KEY_VARIABLES if os.environ.get(name)), None)
    remember(key)
    return key


def header_parts(header: str) -> tuple[str, str]:
    """A `NAME:VALUE` request header as (name, value), each stripped of surrounding spaces."""
    name, _, value = header.partition(":")
    return name.strip(), value.strip()


def masked_header(header: str) -> str:
    """A `NAME:VALUE` header fit to be written: its name, its value masked."""
    return f"{header_parts(header)[0]}:{MASK}"


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def redact(text: str) -> str:
    """`text` with the user info of every URL, every `Bearer`/`Basic` credential and every
    remembered secret replaced by MASK: the one redaction of everything written."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group('lead')}{m.group('scheme')}{MASK}@", text, concurrent=True)
    text = _AUTH_VALUE.sub(lambda m: f"{m.group('scheme')}{MASK}", text, concurrent=True)
    for secret in sorted(_remembered, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """A command line fit to be written: the value of --api-key and of each --header masked, URLs redacted."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == API_KEY_FLAG:
            arg = MASK
        elif arg.startswith(API_KEY_FLAG + "="):
            arg = f"{API_KEY_FLAG}={MASK}"
        elif out and out[-1] == HEADER_FLAG:
            arg = masked_header(arg)
        elif arg.startswith(HEADER_FLAG + "="):
            arg = f"{HEADER_FLAG}={masked_header(arg.removeprefix(HEADER_FLAG + '='))}"
        out.append(redact(arg))
    return out
