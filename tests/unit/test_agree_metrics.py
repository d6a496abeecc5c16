"""Agreement metrics and tables on made-up top-k answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.agree.metrics import TopK, frequency_bands, token_counts, top1_agrees, top1_margin, topk_recall, union_kl
from harness.agree.sequences import ForcedSequence
from harness.agree.tables import agreement_by_margin, bands_table, positions_table, shifts_table, summary_table
from harness.engines.scoring import ScoredTokens


def top(*pairs: tuple[int, float]) -> TopK:
    return TopK(tuple(t for t, _ in pairs), tuple(lp for _, lp in pairs))


def test_identical_answers_agree_fully_with_zero_kl():
    a = top((5, -0.5), (7, -1.5), (9, -2.0))
    assert top1_agrees(a, a) and topk_recall(a, a) == 1.0 and union_kl(a, a) == 0.0


def test_swapped_first_two_tokens_disagree_on_top1_but_keep_the_set():
    ref, cand = top((5, -0.5), (7, -1.5)), top((7, -0.5), (5, -1.5))
    assert not top1_agrees(ref, cand)
    assert topk_recall(ref, cand) == 1.0
    p = np.exp([-0.5, -1.5]) / np.exp([-0.5, -1.5]).sum()  # ref on {5, 7}; cand is p reversed
    assert union_kl(ref, cand) == pytest.approx(float(np.sum(p * np.log(p / p[::-1]))))


def test_token_outside_a_top_k_takes_that_servers_kth_logprob():
    ref, cand = top((1, -1.0), (2, -2.0)), top((1, -1.0), (3, -2.0))
    assert topk_recall(ref, cand) == 0.5
    # union {1, 2, 3}: ref = (-1, -2, -2 floor), cand = (-1, -2 floor, -2): same shape, KL 0
    assert union_kl(ref, cand) == pytest.approx(0.0, abs=1e-12)
    cand_far = top((1, -1.0), (3, -5.0))
    ref_p = np.exp([-1.0, -2.0, -2.0])
    ref_p /= ref_p.sum()
    cand_q = np.exp([-1.0, -5.0, -5.0])
    cand_q /= cand_q.sum()
    assert union_kl(ref, cand_far) == pytest.approx(float(np.sum(ref_p * np.log(ref_p / cand_q))))


logprob_lists = st.lists(st.floats(-20, 0), min_size=2, max_size=6)


@given(logprob_lists, logprob_lists, st.integers(0, 3))
def test_union_kl_is_finite_and_never_negative(ref_lp, cand_lp, shift):
    ref = TopK(tuple(range(len(ref_lp))), tuple(sorted(ref_lp, reverse=True)))
    cand = TopK(tuple(range(shift, shift + len(cand_lp))), tuple(sorted(cand_lp, reverse=True)))
    kl = union_kl(ref, cand)
    assert math.isfinite(kl) and kl >= -1e-12


def test_a_tie_for_first_place_agrees_with_either_tied_token():
    ref = top((4, -1.0), (8, -1.0), (2, -3.0))
    assert top1_agrees(ref, top((8, -0.9), (4, -1.2))) and top1_agrees(ref, top((4, -0.9), (8, -1.2)))
    assert not top1_agrees(ref, top((2, -0.9), (4, -1.2)))
    assert top1_agrees(top((3, -1.0), (5, -2.0)), top((5, -1.5), (3, -1.5)))  # the candidate's tie
    assert top1_margin(ref) == 0.0


def test_margin_is_the_lead_of_the_first_token():
    assert top1_margin(top((1, -0.2), (2, -1.0))) == pytest.approx(0.8)
    assert top1_margin(top((1, -0.2))) == math.inf


def test_frequency_bands_follow_the_cumulative_share_of_the_text():
    counts = token_counts([[1] * 50 + [2] * 30, [3] * 10 + [4] * 5 + [5] * 5])
    assert frequency_bands(counts) == {1: "common", 2: "mid", 3: "mid", 4: "rare", 5: "rare"}


def _scored(*tops: TopK, targets: list[float]) -> ScoredTokens:
    return ScoredTokens(targets, [list(t.ids) for t in tops], [list(t.logprobs) for t in tops])


def _two_sequences():
    seqs = [ForcedSequence("a", [0, 1], [5, 7]), ForcedSequence("b", [0], [5])]
    ref = {"a": _scored(top((5, -0.1), (7, -3.0)), top((7, -0.2), (5, -2.0)), targets=[-0.1, -0.2]),
           "b": _scored(top((5, -0.5), (9, -0.6)), targets=[-0.5])}
    cand = {"a": _scored(top((5, -0.1), (7, -3.0)), top((7, -0.2), (5, -2.0)), targets=[-0.1, -0.2]),
            "b": _scored(top((9, -0.4), (5, -0.7)), targets=[-0.7])}
    return seqs, ref, cand


def test_positions_table_has_one_row_per_scored_token():
    positions = positions_table(*_two_sequences())
    assert list(positions["prompt_id"]) == ["a", "a", "b"]
    assert list(positions["position"]) == [2, 3, 1]
    assert list(positions["top1_agreement"]) == [True, True, False]
    assert positions["target_logprob_shift"].tolist() == pytest.approx([0.0, 0.0, -0.2])
    assert positions["kl_union_nats"].iloc[:2].tolist() == [0.0, 0.0]
    assert positions["kl_union_nats"].iloc[2] > 0
    assert list(positions["band"]) == ["common", "mid", "common"]  # text 5, 7, 5: token 5 writes 2/3


def test_positions_skip_sequences_one_server_did_not_score():
    seqs, ref, cand = _two_sequences()
    del cand["b"]
    assert set(positions_table(seqs, ref, cand)["prompt_id"]) == {"a"}


def test_summary_bands_shifts_and_margin_bins():
    positions = positions_table(*_two_sequences())
    summary = summary_table(positions).set_index(["metric", "stat"])["value"]
    assert summary[("positions", "value")] == 3 and summary[("sequences", "value")] == 2
    assert summary[("top1_agreement", "mean")] == pytest.approx(2 / 3)
    assert summary[("abs_target_logprob_shift", "max")] == pytest.approx(0.2)
    bands = bands_table(positions).set_index("band")
    assert bands.loc["common", "positions"] == 2 and bands.loc["common", "top1_agreement"] == 0.5
    shifts = shifts_table(positions, count=1)
    assert shifts["prompt_id"].tolist() == ["b"]
    by_margin = agreement_by_margin(positions, bins=3)
    assert by_margin["positions"].sum() == 3
    assert by_margin["top1_agreement"].iloc[0] == 0.0  # the smallest margin (0.1 nats) is the flip
