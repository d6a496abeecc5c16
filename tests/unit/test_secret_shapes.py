"""Secrets in odd shapes: every credential-bearing value (the API key, each header's value) and each
of its tokens of 8 or more characters is a remembered secret, masked wherever a run writes, also
when a server echoes only the token of `Bearer TOKEN`, or a key holding a quote; a key that no HTTP
header can carry is refused in one line before any request."""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness import secrets
from harness.cli import app
from harness.secrets import MASK, redact, remember, remember_header
from tests.fakes.echo_server import echoing
from tests.fakes.recording_server import recording
from tests.fakes.stream_server import Script

pytestmark = pytest.mark.cli  # runs the command line (in subprocesses, and in this process for each drawn key)

RUN = ["run", "gsm8k", "--limit", "4", "--max-new-tokens", "4", "--warmup", "0", "--no-progress",
       "--power-sample-ms", "0", "--scrape-interval", "0.05", "--max-errors", "10"]
PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E)  # what an HTTP header carries
NUMBERISH = frozenset("0123456789.-+eE")


def _distinct(key: str) -> bool:
    """A key that can be told from what a run writes of its own: none of its remembered parts is made
    only of what numbers are made of (a key `00000000` is masked in every text, and is also part of
    the figure 0.0380608160000000), and it does not hold the mask itself."""
    parts = [part for part in (key, *secrets.tokens(key)) if len(part) >= secrets.MIN_SECRET_CHARS]
    return MASK not in key and all(not set(part) <= NUMBERISH for part in parts)


# Printable ASCII, quotes and backslashes too, no space at either end (refused: HTTP cannot carry it).
KEYS = st.text(PRINTABLE, min_size=8, max_size=48).filter(lambda key: key == key.strip() and _distinct(key))


@contextmanager
def fresh_memory() -> Iterator[None]:
    """The process's remembered secrets emptied for the block, as they were after it."""
    kept, literals = set(secrets._remembered), list(secrets._literals)
    secrets._remembered.clear()
    secrets._literals.clear()
    try:
        yield
    finally:
        secrets._remembered.clear()
        secrets._remembered.update(kept)
        secrets._literals[:] = literals


def test_the_token_of_a_bearer_header_echoed_alone_is_masked():
    with fresh_memory():
        remember("Bearer tok3n-GATEWAY-77x")  # what `--header "Authorization: Bearer ..."` remembers
        assert redact("invalid token tok3n-GATEWAY-77x") == f"invalid token {MASK}"
        assert redact("invalid token GATEWAY") == "invalid token GATEWAY"  # 7 characters: ordinary text


def test_a_bearer_credential_holding_a_space_is_masked_when_echoed_without_its_scheme():
    with fresh_memory():
        remember_header("Bearer 000000 0")  # no token of the credential alone is 8 characters long
        assert redact("Bearer 000000 0 ; 000000 0") == f"{MASK} ; {MASK}"


def test_a_basic_header_is_remembered_decoded_too():
    with fresh_memory():
        remember_header("Basic " + base64.b64encode(b"alice:pw-basic-2024").decode())
        assert redact("user alice:pw-basic-2024 refused; password pw-basic-2024") == f"user {MASK} refused; password {MASK}"


def test_a_key_holding_a_quote_is_masked_whole_beside_its_bearer_scheme():
    key = 'sk-ab"q"-K4xyz0123'
    with fresh_memory():
        remember(key)
        for echoed in (f"Bearer {key}", json.dumps({"message": f"Bearer {key}"}), repr(f"Bearer {key}'")):
            assert "K4xyz" not in redact(echoed) and '"q"' not in redact(echoed), redact(echoed)


@pytest.mark.parametrize("how", ["--api-key", "SPARKBENCH_API_KEY", "--header"])
def test_a_non_ascii_key_is_refused_in_one_line_before_any_request(how, tmp_path):
    key = "sk-pässwort-0123"
    with recording(Script()) as (url, seen):
        given = {"--api-key": ["--api-key", key], "--header": ["--header", f"X-Key: {key}"]}.get(how, [])
        env = {**os.environ, "SPARKBENCH_API_KEY": key if how == "SPARKBENCH_API_KEY" else ""}
        done = subprocess.run([sys.executable, "-m", "harness.cli", *RUN, *given, "--server", url,
                               "--results", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("sparkbench: ") and "non-ASCII character at position 5" in line and key not in line
    assert seen == [] and not list(tmp_path.iterdir())


def _forms(key: str) -> set[bytes]:
    """The key as a file could hold it, and each of its tokens of 8 or more characters."""
    tokens = {token for token in secrets.tokens(key) if len(token) >= secrets.MIN_SECRET_CHARS}
    return {form.encode() for part in (key, *tokens) for form in (part, json.dumps(part)[1:-1])}


def _texts(path: Path) -> Iterator[bytes]:
    """The bytes of the file, and each text cell of a Parquet table."""
    yield path.read_bytes()
    if path.suffix == ".parquet":
        for cell in pd.read_parquet(path).to_numpy().ravel():
            if isinstance(cell, str):
                yield cell.encode()


def _run(results: Path, api: str, flags: list[str], env_key: str = "") -> tuple[object, list[Path]]:
    """A GSM8K run against the echoing gateway: the runner's result, and every file it wrote."""
    with fresh_memory(), echoing(Script(api=api)) as url:
        done = CliRunner().invoke(app, [*RUN, *flags, "--server", url, "--results", str(results)],
                                  env={"SPARKBENCH_API_KEY": env_key})
    assert done.exit_code in (0, 1) and (done.exception is None or isinstance(done.exception, SystemExit)), \
        (done.output, done.exception)
    return done, [path for path in results.rglob("*") if path.is_file()]


@functools.cache
def _own_text(api: str) -> bytes:
    """All that a run without credentials writes and prints: a key that is part of it (Hypothesis
    draws the code's own words, `p95_cert`) cannot be told from a leak."""
    done, written = _run(Path(tempfile.mkdtemp(prefix="own-text-")), api, [])
    return b"\n".join([done.output.encode(), *(text for path in written for text in _texts(path))])


@given(key=KEYS, how=st.sampled_from(["--api-key", "SPARKBENCH_API_KEY", "authorization", "x-header"]),
       api=st.sampled_from(["sglang", "openai"]))
@example(key='0000000"', how="authorization", api="sglang")  # a token that JSON escapes: `0000000\\"` leaked
@example(key="000000 0", how="authorization", api="sglang")  # the credential echoed without its scheme leaked
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_byte_of_an_echoed_key_reaches_the_run_folder(key, how, api, tmp_path_factory):
    forms = _forms(key)
    assume(not [form for form in forms if form in _own_text(api)])
    flags = {"--api-key": ["--api-key", key], "authorization": ["--header", f"Authorization: Bearer {key}"],
             "x-header": ["--header", f"X-Tenant-Key: {key}"]}.get(how, [])
    done, written = _run(tmp_path_factory.mktemp("runs"), api, flags, key if how == "SPARKBENCH_API_KEY" else "")
    assert {path.name for path in written} >= {"requests.jsonl", "requests.parquet", "manifest.json"}
    for path in written:
        for text in _texts(path):
            assert not [form for form in forms if form in text], (path.name, text[:2000])
    assert not [form for form in forms if form in done.output.encode()], done.output
