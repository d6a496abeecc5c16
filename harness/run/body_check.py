"""`--extra-body` checked before any request: a field that the run's request bodies set themselves
is refused in one line, before the engine is detected (detection alone is eight requests).

A body's fields do not depend on the prompt's values (every sampling parameter is sent explicitly,
`harness.spec.sampling_fields`), so stand-in prompts show them all. With `--backend` naming the API,
the extra body is checked against that API's whole body. With `auto` the API is known only after
detection, so it is checked against what every API's body takes from the request itself: the
fields that carry the prompt or the workload's sampling (those that change between two stand-ins
of different prompts and sampling, in any API), and the fields every API sets (`stream`). A field
one API's client sets as a constant (llama.cpp's `min_p: 0`) is then left to the check that the
run makes of each real prompt once the workload is built, as it is for the API detected.
"""

from __future__ import annotations

from typing import Any

from harness.engines.detect import AUTO
from harness.engines.registry import api_client, apis
from harness.engines.shaping import ExtraBodyClash, with_extra_body
from harness.errors import SparkbenchError
from harness.spec import Prompt, SamplingParams

# Two prompts that differ in every value a body takes from its prompt and sampling.
STAND_INS = ((Prompt("a", SamplingParams(max_new_tokens=1), input_ids=(1,)),
              Prompt("b", SamplingParams(2, 0.5, 0.9, 5, True, ("x",), 7), input_ids=(2,))),
             (Prompt("a", SamplingParams(max_new_tokens=1), text="a"),
              Prompt("b", SamplingParams(2, 0.5, 0.9, 5, True, ("x",), 7), text="b")))


def check_extra_body(extra: dict[str, Any] | None, backend: str, chat: bool) -> None:
    """ExtraBodyClash when `extra` sets a field that the requests of API `backend` set themselves
    (with `auto`: a field any API takes from the request, module docstring); nothing without one."""
    if not extra:
        return
    bodies = _bodies(apis() if backend == AUTO else (backend,), chat)
    if backend == AUTO:
        shared = set.intersection(*(set(a) for _, a, _ in bodies)) if bodies else set()
        bodies = [(api, {k: v for k, v in a.items() if k in shared} | _varying(a, b), b) for api, a, b in bodies]
    for api, body, _ in bodies:
        try:
            with_extra_body(body, extra)
        except ExtraBodyClash as exc:
            hint = "; --backend names the API" if backend == AUTO else ""
            raise ExtraBodyClash(f"{exc} ({api} API{hint})") from None


def _bodies(names: tuple[str, ...], chat: bool) -> list[tuple[str, dict, dict]]:
    """(api, body of stand-in a, body of stand-in b) for each API and prompt form it can send."""
    out = []
    for api in names:
        try:
            client = api_client(api, model="model", chat=chat, engine=api)
        except SparkbenchError:
            continue  # an API that cannot send these prompts (chat on a native API) is not the run's
        for a, b in STAND_INS:
            try:
                out.append((api, client.body(a), client.body(b)))
            except SparkbenchError:
                continue  # a form this API does not send (token ids as chat messages)
    return out


def _varying(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The fields of `a` whose values differ in `b` (objects field by field)."""
    out = {}
    for key, value in a.items():
        other = b.get(key)
        if isinstance(value, dict) and isinstance(other, dict):
            inner = _varying(value, other)
            if inner:
                out[key] = inner
        elif value != other:
            out[key] = value
    return out
