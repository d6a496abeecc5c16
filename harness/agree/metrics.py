"""Agreement between two servers' next-token distributions, one scored position at a time.

Every function takes what a server returned at one position: its top-k token ids in rank order
and their natural-log probabilities (`TopK`). Nothing here knows about HTTP or engines.

The servers return only their top-k, so a divergence over the whole vocabulary cannot be
computed. `union_kl` states its approximation in its docstring; it is exact when both servers
return the same set and that set carries all the probability mass.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

BANDS = ("common", "mid", "rare")
# Cumulative share of the scored text at which a token stops being common / mid (see frequency_bands).
BAND_EDGES = (0.5, 0.9)


@dataclass(frozen=True)
class TopK:
    """One server's top-k at one position: token ids in rank order and their log-probabilities (nats)."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    def as_dict(self) -> dict[int, float]:
        return dict(zip(self.ids, self.logprobs))


def first_tokens(top: TopK) -> set[int]:
    """The tokens that share the highest log-probability: one, or several at an exact tie."""
    return {token for token, logprob in zip(top.ids, top.logprobs) if logprob == top.logprobs[0]}


def top1_agrees(ref: TopK, cand: TopK) -> bool:
    """True when both servers rank the same token first (argmax of the next-token distribution).

    At an exact tie for first place any tied token counts: which of them an engine lists first is
    its sorting's choice, not the model's (BF16 logits of a small model tie often).
    """
    return bool(first_tokens(ref) & first_tokens(cand))


def topk_recall(ref: TopK, cand: TopK) -> float:
    """|ref top-k ∩ cand top-k| / |ref top-k|: the share of the reference's top-k that the candidate
    also ranks in its top-k (unitless, 0..1; order inside the sets is ignored)."""
    return len(set(ref.ids) & set(cand.ids)) / len(ref.ids)


def top1_margin(top: TopK) -> float:
    """log p(top-1) - log p(top-2) in nats: how far the first token leads (inf with k = 1)."""
    return top.logprobs[0] - top.logprobs[1] if len(top.logprobs) > 1 else math.inf


def _union_distribution(top: TopK, union: list[int]) -> np.ndarray:
    """The server's probabilities on `union`, renormalized to sum to 1; a token outside its top-k
    gets its k-th log-probability (an upper bound of its true value)."""
    known = top.as_dict()
    floor = min(top.logprobs)
    logp = np.array([known.get(token, floor) for token in union], dtype=float)
    weights = np.exp(logp - logp.max())
    return weights / weights.sum()


def union_kl(ref: TopK, cand: TopK) -> float:
    """KL(P_ref || P_cand) in nats on the union U of both top-k sets, an approximation:

        KL = sum_{t in U} p(t) * ln(p(t) / q(t)),  p, q = each server's probabilities on U, renormalized

    where a token in U outside one server's top-k is given that server's k-th log-probability (an
    upper bound). It ignores the mass outside U and the shape within it that the bound hides, so
    it is a lower-resolution view of the full KL, not a bound on it. Identical top-k answers give 0.
    """
    union = sorted(set(ref.ids) | set(cand.ids))
    p, q = _union_distribution(ref, union), _union_distribution(cand, union)
    return float(np.sum(p * (np.log(p) - np.log(q))))


def token_counts(sequences: Iterable[Iterable[int]]) -> Counter[int]:
    """How often each token id occurs across the given token sequences (the workload's text)."""
    counts: Counter[int] = Counter()
    for tokens in sequences:
        counts.update(tokens)
    return counts


def frequency_bands(counts: Mapping[int, int], edges: tuple[float, float] = BAND_EDGES) -> dict[int, str]:
    """Band of every counted token: `common`, `mid` or `rare`, by cumulative share of the text.

    Tokens are ranked by count (ties by id). A token is `common` while the tokens ranked before it
    make up less than edges[0] of all occurrences, `mid` while less than edges[1], `rare` after:
    with the default edges, the common tokens are the few that write half of the text and the rare
    ones the long tail that writes its last tenth. A token never counted has no band.
    """
    total = sum(counts.values())
    bands: dict[int, str] = {}
    before = 0
    for token, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        share = before / total
        bands[token] = BANDS[0] if share < edges[0] else BANDS[1] if share < edges[1] else BANDS[2]
        before += count
    return bands
