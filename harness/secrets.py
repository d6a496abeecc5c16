"""Credentials: where an API key comes from, and keeping every secret out of what is written.

A password in a server URL (`http://user:pass@host`) is used for the requests (sent as basic
auth) and shown nowhere; an API key is sent as `Authorization: Bearer ...` and never written. Every
text the harness writes (records, manifests, logs, reports, error lines) goes through `redact`,
which masks URL user info, `Bearer`/`Basic` credentials, and every secret this process was given
(`remember`), wherever a server may have echoed it.

A credential is remembered whole, as a server may echo it (stripped of surrounding spaces, JSON- or
Python-escaped, HTML-escaped), and each of its tokens of MIN_SECRET_CHARS or more (its words, its
parts between quotes and separators, its runs of letters and digits): a gateway that echoes only
the token of `Authorization: Bearer TOKEN` ("invalid token
TOKEN"), or a part of a key cut at a quote, is masked as the whole is. A credential must be
printable ASCII (what an HTTP header carries); anything else is refused before it is sent.
"""

from __future__ import annotations

import base64
import html
import json
import os
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit

import regex

from harness.errors import SparkbenchError

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
# A credential's tokens, as a server may quote one alone: its words (split at whitespace), its
# parts between quotes, commas, semicolons and equals signs (`token="..."`), its runs of letters and digits.
_TOKENS = (regex.compile(r"\S+"), regex.compile(r"[^\s\"',;=]+"), regex.compile(r"[A-Za-z0-9]+"))
_remembered: set[str] = set()
# Each remembered form as a literal pattern, longest first: a literal is found at well under a
# nanosecond a byte, with the interpreter let go, where one alternation of them all costs ~30.
_literals: list[tuple[str, regex.Pattern]] = []


def echoed_forms(secret: str) -> set[str]:
    """`secret` as a server may echo it: as given, stripped, JSON-escaped, HTML-escaped, and each of
    those as Python's repr writes it (backslashes doubled, a quote escaped or not)."""
    plain = {secret, secret.strip(), json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             html.escape(secret)}
    doubled = {form.replace("\\", "\\\\") for form in plain}
    return plain | doubled | {form.replace("'", "\\'") for form in doubled}


def tokens(secret: str) -> set[str]:
    """Every token of `secret` that a server may echo alone (`_TOKENS`), of any length."""
    return {token for pattern in _TOKENS for token in pattern.findall(secret)}


def remember(secret: str | None) -> None:
    """Mask `secret` and each of its tokens of MIN_SECRET_CHARS or more, each in all its echoed
    forms, in everything `redact` sees from now on, in this process."""
    if not secret:
        return
    parts = {secret} | {token for token in tokens(secret) if len(token) >= MIN_SECRET_CHARS}
    found = {form for part in parts for form in echoed_forms(part) if len(form) >= MIN_SECRET_CHARS and form.strip()}
    if found - _remembered:
        _remembered.update(found)
        _literals[:] = [(form, regex.compile(regex.escape(form))) for form in sorted(_remembered, key=len, reverse=True)]


@lru_cache(maxsize=64)
def _masking(forms: tuple[str, ...]) -> regex.Pattern:
    """One pattern for the remembered forms a text holds, longest first (a key before its tokens)."""
    return regex.compile("|".join(regex.escape(form) for form in forms))


def checked_credential(value: str, what: str) -> str:
    """`value` when an HTTP header can carry it (printable ASCII, no space at either end); else a
    one-line refusal naming `what` and the position, never the value."""
    bad = next((i for i, char in enumerate(value) if not " " <= char <= "~" and char != "\t"), None)
    if bad is not None:
        kind = "a non-ASCII character" if ord(value[bad]) > 0x7E else "a control character"
        raise SparkbenchError(f"{what} holds {kind} at position {bad + 1}; a credential sent in an HTTP "
                              "header must be printable ASCII")
    if value != value.strip():
        raise SparkbenchError(f"{what} begins or ends with a space, which an HTTP header cannot carry")
    return value


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


def remember_header(value: str) -> None:
    """Remember a header's value as a credential, and what follows its first word (the credentials
    of `SCHEME CREDENTIALS`, which a gateway may echo without the scheme, and which may hold a
    space, so that no token of it alone is the whole); a `Basic` one also as its decoded
    `user:password` and password, as `remember_url` does for a URL's."""
    remember(value)
    scheme, _, encoded = value.partition(" ")
    remember(encoded.strip())
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode()
        except ValueError:  # not base64 of UTF-8 text: nothing more to remember
            return
        remember(decoded)
        remember(decoded.partition(":")[2])


def api_key(explicit: str | None = None) -> str | None:
    """The key given on the command line, else from the environment (API_KEY_VARIABLES), else None;
    remembered for `redact`."""
    named = "--api-key" if explicit else next((name for name in API_KEY_VARIABLES if os.environ.get(name)), None)
    key = explicit or (os.environ[named] if named else None)
    if key:
        remember(key)
        checked_credential(key, f"the API key ({named})")
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
    """`text` with every remembered secret, the user info of every URL and every `Bearer`/`Basic`
    credential replaced by MASK: the one redaction of everything written. The remembered secrets
    go first: a key holding a character the `Bearer` pattern stops at (a quote) would otherwise
    have its head masked and its tail left for no remembered form to match."""
    held = tuple(form for form, literal in _literals if literal.search(text, concurrent=True))
    if held:
        text = _masking(held).sub(MASK, text, concurrent=True)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('lead')}{m.group('scheme')}{MASK}@", text, concurrent=True)
    return _AUTH_VALUE.sub(lambda m: f"{m.group('scheme')}{MASK}", text, concurrent=True)


def redacted(value: Any) -> Any:
    """`value` with every text in it redacted (dict keys too), its structure kept: a JSON document is
    redacted this way before it is written, so that a secret made of what JSON is made of (spaces,
    digits, quotes) can never break the document, and a quote in a secret is found before JSON
    escapes it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redacted(key): redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(str(value))  # written as its text (`json.dumps(default=str)`), so redacted as that


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
