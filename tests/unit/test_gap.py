"""The gap design: cells, the sampling each sends, and the attribution's arithmetic."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.gap.analysis import attribute, cell_arrays, cell_figures
from harness.gap.design import (
    CONTENTS,
    FACTORS,
    GSM8K_CORNER,
    SYNTHETIC_CORNER,
    Cell,
    CellWorkload,
    Lengths,
    cell_sampling,
    cells,
)
from harness.spec import Prompt, SamplingParams
from harness.testbed.conversion_check import common_prefix

LENGTHS = Lengths(fixed=64, natural_cap=256)


def test_every_content_gets_four_cells_and_the_corners_are_among_them():
    design = cells(CONTENTS)
    assert len(design) == 4 * len(CONTENTS)
    assert {SYNTHETIC_CORNER, GSM8K_CORNER} <= {c.levels for c in design}


def test_a_fixed_cell_ignores_eos_and_stops_and_a_natural_one_keeps_the_contents_stops():
    original = SamplingParams(max_new_tokens=9, stop=("Question:",))
    fixed = cell_sampling(Cell("gsm8k", "greedy", "fixed"), original, LENGTHS, seed=3)
    natural = cell_sampling(Cell("gsm8k", "published", "natural"), original, LENGTHS, seed=3)
    assert (fixed.max_new_tokens, fixed.ignore_eos, fixed.stop, fixed.temperature, fixed.seed) == (64, True, (), 0.0, None)
    assert (natural.max_new_tokens, natural.ignore_eos, natural.stop) == (256, False, ("Question:",))
    assert (natural.temperature, natural.top_p, natural.top_k, natural.seed) == (0.6, 0.95, 29, 3)
    assert (fixed.top_p, fixed.top_k) == (1.0, -1)  # greedy: no truncation


def test_a_cell_read_back_from_a_design_file_samples_as_the_one_written():
    """Levels parsed from JSON are equal strings, not the same objects as the module's constants."""
    original = SamplingParams(max_new_tokens=9, stop=("Question:",))
    for cell in cells(("gsm8k",)):
        read = Cell(**json.loads(json.dumps(cell.to_dict())))
        assert cell_sampling(read, original, LENGTHS, seed=3) == cell_sampling(cell, original, LENGTHS, seed=3)


class _Inner:
    name = "gsm8k"

    def prompts(self):
        return [Prompt(f"q{i}", SamplingParams(max_new_tokens=5, stop=("Q:",)), text=f"t{i}", followups=("more",))
                for i in range(3)]

    def warmup_prompts(self, count):
        return self.prompts()[:count]

    def spec(self):
        return {"name": "gsm8k", "requires_uncached_prompts": True, "sampling": {"stop": ["Q:"]}}


def test_a_cell_sends_the_contents_prompts_with_its_sampling_seeded_per_prompt():
    workload = CellWorkload(_Inner(), Cell("gsm8k", "published", "natural"), LENGTHS, base_seed=10)
    prompts = workload.prompts()
    assert [p.prompt_id for p in prompts] == ["q0", "q1", "q2"]
    assert [p.sampling.seed for p in prompts] == [10, 11, 12]
    assert all(p.followups == () for p in prompts)
    spec = workload.spec()
    assert spec["gap_cell"] == {"content": "gsm8k", "sampling": "published", "length": "natural"}
    assert spec["sampling"]["stop"] == ["Q:"] and spec["requires_uncached_prompts"] is False


def _cube_value(effects: dict[str, float], interaction: float):
    """A figure over the cube: additive effects plus an interaction of all three factors."""
    def value(levels):
        moved = [levels[i] == GSM8K_CORNER[i] for i in range(3)]
        return np.array([sum(effects[f] for f, m in zip(FACTORS, moved) if m) + interaction * all(moved)])
    return value


def test_shapley_shares_add_up_to_the_change_and_one_at_a_time_leaves_the_interaction():
    effects = {"content": -0.3, "sampling": -0.2, "length": -0.1}
    shares = attribute(_cube_value(effects, interaction=0.06))
    assert shares["delta"][0] == pytest.approx(-0.54)
    assert sum(shares[f"shapley:{f}"][0] for f in FACTORS) == pytest.approx(-0.54)
    for factor, effect in effects.items():
        assert shares[f"one_at_a_time:{factor}"][0] == pytest.approx(effect)
        assert shares[f"shapley:{factor}"][0] == pytest.approx(effect + 0.02)  # the interaction shared out
    assert shares["one_at_a_time:interaction"][0] == pytest.approx(0.06)


def _runs(spec_accept):
    plain = pd.DataFrame({"prompt_id": ["a", "b"], "status": ["ok", "ok"], "completion_tokens": [11, 21],
                          "server_tpot_ms": [10.0, 10.0], "decode_ms": [100.0, 200.0],
                          "accept_length": [math.nan] * 2, "verify_rounds": [math.nan] * 2})
    spec = plain.assign(server_tpot_ms=[5.0, 5.0], accept_length=spec_accept, verify_rounds=[5.0, math.nan])
    return plain, spec


def test_speedup_is_the_ratio_of_decode_throughputs_and_an_undrafted_request_accepts_one_per_round():
    plain, spec = _runs([2.0, math.nan])
    arrays = cell_arrays(plain, spec, ["a", "b"])
    figures = cell_figures(arrays, np.arange(2)[None, :])
    assert arrays.timing == "server"
    assert figures["speedup"][0] == pytest.approx(2.0)
    # a: 2.0 over 5 rounds (10 tokens); b drafted nothing: 20 tokens in 20 rounds
    assert figures["accept_length_token_weighted"][0] == pytest.approx(30 / 25)
    assert figures["accept_length_request_weighted"][0] == pytest.approx(1.5)


def _client_timed(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    """(prompt id, status, completion tokens, decode ms) of a run without the server's timings."""
    ids, status, tokens, decode = zip(*rows)
    return pd.DataFrame({"prompt_id": ids, "status": status, "completion_tokens": tokens, "decode_ms": decode,
                         "server_tpot_ms": math.nan, "accept_length": math.nan, "verify_rounds": math.nan})


def test_client_timing_counts_the_tokens_after_the_first_over_the_decode_time():
    """Plain: 10 and 20 tokens after the first in 100 and 200 ms (100 tok/s); speculative: the same
    in 50 and 100 ms (200 tok/s). A third prompt of one token, ok on the plain server and failed on
    the speculative one though each reports a decode time, adds nothing to either arm."""
    plain = _client_timed([("a", "ok", 11, 100.0), ("b", "ok", 21, 200.0), ("c", "ok", 1, 50.0)])
    spec = _client_timed([("a", "ok", 11, 50.0), ("b", "ok", 21, 100.0), ("c", "failed", 1, 50.0)])
    arrays = cell_arrays(plain, spec, ["a", "b", "c"])
    figures = cell_figures(arrays, np.arange(3)[None, :])
    assert arrays.timing == "client"
    assert figures["plain_decode_tok_s"][0] == pytest.approx(100.0)
    assert figures["spec_decode_tok_s"][0] == pytest.approx(200.0)
    assert figures["speedup"][0] == pytest.approx(2.0)


def test_a_failed_request_adds_nothing_to_either_arm():
    plain, spec = _runs([2.0, 2.0])
    spec.loc[1, "status"] = "failed"
    figures = cell_figures(cell_arrays(plain, spec, ["a", "b"]), np.arange(2)[None, :])
    assert figures["spec_decode_tok_s"][0] == pytest.approx(10 / 0.05)
    assert figures["accept_length_request_weighted"][0] == pytest.approx(2.0)


@pytest.mark.parametrize(("a", "b", "n"), [([1, 2, 3], [1, 2, 4], 2), ([5], [6], 0), ([1, 2], [1, 2, 3], 2)])
def test_common_prefix_counts_the_shared_leading_tokens(a, b, n):
    assert common_prefix(a, b) == n


def test_cells_come_content_by_content():
    order = [c.content for c in cells(("synthetic", "gsm8k"))]
    assert order == [k for k, g in itertools.groupby(order) for _ in range(4)]


def test_a_design_stops_at_the_run_a_signal_ended_and_keeps_the_cells_before_it(monkeypatch, tmp_path):
    """Ctrl-C or SIGTERM during a cell's run ends the design there: no later run starts, and gap.json
    holds the cells so far (the analysis reads a partial design)."""
    import json
    from types import SimpleNamespace

    import harness.gap.run as gap_run
    import harness.session as session
    from harness.errors import SparkbenchError
    from harness.gap.design import Lengths

    started: list[str] = []

    def fake_run_planned(target, backend, plan, options, request):
        started.append(request.label)
        if len(started) == 3:
            raise SparkbenchError("run interrupted after 1 of 2 requests (stop asked (SIGINT); the requests "
                                  "in flight were recorded)")
        return SimpleNamespace(path=tmp_path / f"run-{len(started)}")

    monkeypatch.setattr(session, "run_planned", fake_run_planned)
    monkeypatch.setattr(session, "run_options", lambda request, url: None)
    monkeypatch.setattr(gap_run, "backend_for", lambda target, api: None)
    monkeypatch.setattr(gap_run, "cell_plan", lambda cell, settings, target: None)
    target = SimpleNamespace(base_url="http://127.0.0.1:1", profile=None)
    settings = gap_run.GapSettings(("synthetic", "gsm8k"), 2, Lengths(8, 16), 64)
    folder = gap_run.run_design({"plain": target, "speculative": target}, settings, tmp_path)
    cells = json.loads((folder / gap_run.MANIFEST).read_text())["cells"]
    assert len(started) == 3
    assert len(cells) == 2 and "stop asked" in cells[1]["errors"]["plain"]
