"""Redaction is linear in its input and masks what the quadratic pattern it replaced masked."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from harness import secrets
from harness.secrets import MASK, redact

# The URL pattern as it was before it was made linear: the reference for what is masked.
REFERENCE_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"']+@")
# Characters that make URL-like text: scheme characters, the separators, the terminators.
URLISH = st.text(alphabet="ab1+.-:/@ \"'xX\n", max_size=200)
# Long words of scheme characters (no whitespace, no "Bearer"/"Basic"), the shape that made the
# old pattern rescan the word from every position.
ADVERSARIAL_PIECE = st.text(alphabet="xy19+.-:/", min_size=1, max_size=6)


def reference_redact(text: str) -> str:
    for secret in sorted(secrets._remembered, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = REFERENCE_URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return secrets._AUTH_VALUE.sub(lambda m: f"{m.group('scheme')}{MASK}", text)


@given(URLISH)
@settings(max_examples=400)
def test_redaction_masks_what_the_reference_masks(text):
    assert redact(text) == reference_redact(text)


@given(st.lists(st.sampled_from(["http://", "a:b@", "1x.", "://", "@", "/", "u", " "]), max_size=60))
def test_url_fragments_are_redacted_as_the_reference_does(parts):
    text = "".join(parts)
    assert redact(text) == reference_redact(text)


@given(ADVERSARIAL_PIECE, ADVERSARIAL_PIECE, st.integers(min_value=20_000, max_value=60_000))
@settings(max_examples=20, deadline=None)
def test_a_credential_beside_long_adversarial_words_is_masked(before, after, length):
    left, right = before * (length // len(before)), after * (length // len(after))
    text = f"{left} https://alice:s3cr3t-word@host/x {right}"
    redacted = redact(text)
    assert "s3cr3t-word" not in redacted
    assert redacted == f"{redact(left)} https://{MASK}@host/x {redact(right)}"


ADVERSARIAL_MB = """
from harness.secrets import redact
for shape in ("x", "a1", "1a.", "a://b", "http://"):
    redact(shape * (4_000_000 // len(shape)))
"""


def test_redaction_of_megabytes_of_adversarial_words_fits_a_cpu_budget():
    """A 4 MB word took the quadratic pattern hours of CPU (10 minutes for 1 MB); linear, it takes
    well under a second. The budget is a resource limit with a thousandfold margin either way,
    not a timing: the child is killed by SIGXCPU only if redaction is superlinear."""
    budget_s = 60

    def limit_cpu() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (budget_s, budget_s))

    done = subprocess.run([sys.executable, "-c", ADVERSARIAL_MB], preexec_fn=limit_cpu, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_main_thread_runs_while_another_thread_redacts():
    """The record writer redacts in its own thread; the main thread (the event loop, and every
    signal's answer) must get the interpreter back while a pattern scans a huge field, not after.
    With the switch interval made longer than the test, the main thread can run during the
    redaction only if the scan lets go of the lock itself: `re` never does, so its count would not
    move between the writer's two readings."""
    ticks, seen, done = [0], {}, threading.Event()

    def writer() -> None:
        seen["before"] = ticks[0]
        redact("a1" * 4_000_000 + " https://alice:s3cr3t-word@host/")
        seen["after"] = ticks[0]
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread = threading.Thread(target=writer)
        thread.start()
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0)  # lets the writer take the lock: the only way it gets it at this interval
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert seen["after"] > seen["before"], seen
