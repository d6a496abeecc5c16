"""Tokens a round of chained drafting, simulated exactly along a greedy output.

`matches[k][i]` says whether draft step k, started from position i, proposes the token the target
itself chose at position i + k + 2 (the target's greedy output is the sequence). A round begins at
position p (the last position whose target features are known; the target's own next token is
already decided), accepts the longest run of matching steps, and yields that many tokens plus the
target's own; the next round begins after them. Pure Python, so the unit tests check it by hand.
"""

from __future__ import annotations


def round_lengths(matches: list[list[bool]], first: int, last: int) -> list[int]:
    """Tokens each round yields from position `first` until the token at `last` is produced."""
    lengths, p = [], first
    while p + 2 <= last:
        accepted = 0
        while (accepted < len(matches) and p < len(matches[accepted]) and matches[accepted][p]):
            accepted += 1
        produced = min(accepted + 1, last - p - 1)
        lengths.append(produced)
        p += produced
    return lengths


def tokens_per_round(matches: list[list[bool]], first: int, last: int) -> float:
    lengths = round_lengths(matches, first, last)
    return sum(lengths) / len(lengths) if lengths else float("nan")
