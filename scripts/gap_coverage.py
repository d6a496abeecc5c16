"""Coverage of the gap's intervals by simulation: records drawn from a known truth, analysed as
`sparkbench gap` analyses a design, and how often each printed interval covers the true value.

The truth is a generative model of one design (contents synthetic, synthetic-matched and gsm8k;
each in its four sampling x length cells; a plain and a speculative run per cell), its levels set
near the learned drafter's reduced-scale design on llama.cpp (docs/gap.md): per-cell accept lengths
and speed-ups, a per-prompt effect shared by the cells of one content, per-request noise, GSM8K's
natural output lengths. Its true figures are those of 200,000 prompts per content. Each replication
draws `n` prompts per content, forms every interval the command prints (each cell's speed-up and
both accept lengths; each attribution share, both base corners) with
`harness.gap.intervals.bootstrap_intervals`, and records whether it covers the truth.

    .venv/bin/python scripts/gap_coverage.py --sizes 6,12,24,48,96 --replications 1000 --out cov.csv

Prints, per kind of interval, the lowest coverage over its intervals at each size, and the
`MIN_PROMPTS` table those give (the fewest prompts at which every interval of a kind covers >= 90%).
"""

from __future__ import annotations

import argparse
import math
from multiprocessing import Pool

import numpy as np
import pandas as pd

from harness.gap.analysis import FIGURES, CellArrays, design_statistic
from harness.gap.design import FIXED, GREEDY, GSM8K, NATURAL, PUBLISHED, SYNTHETIC, SYNTHETIC_MATCHED, cells
from harness.gap.intervals import bootstrap_intervals, share_kind

FIXED_TOKENS, NATURAL_CAP = 128, 512  # the command's defaults
TRUTH_PROMPTS = 200_000
# (accept length, speed-up) per (content, sampling, length)
LEVELS = {
    (SYNTHETIC, GREEDY, FIXED): (2.6, 0.75), (SYNTHETIC, GREEDY, NATURAL): (3.5, 1.20),
    (SYNTHETIC, PUBLISHED, FIXED): (2.1, 0.65), (SYNTHETIC, PUBLISHED, NATURAL): (2.2, 0.60),
    (SYNTHETIC_MATCHED, GREEDY, FIXED): (2.5, 0.70), (SYNTHETIC_MATCHED, GREEDY, NATURAL): (3.3, 1.05),
    (SYNTHETIC_MATCHED, PUBLISHED, FIXED): (2.1, 0.65), (SYNTHETIC_MATCHED, PUBLISHED, NATURAL): (2.2, 0.62),
    (GSM8K, GREEDY, FIXED): (2.2, 0.63), (GSM8K, GREEDY, NATURAL): (2.5, 0.70),
    (GSM8K, PUBLISHED, FIXED): (2.2, 0.73), (GSM8K, PUBLISHED, NATURAL): (2.3, 0.73),
}
PLAIN_TPOT_S = {SYNTHETIC: 0.009, SYNTHETIC_MATCHED: 0.013, GSM8K: 0.013}
SD_PROMPT, SD_REQUEST, SD_TPOT, SD_ROUND = 0.3, 0.25, 0.12, 0.2  # log scale
GSM8K_OUTPUT_MEDIAN, SD_OUTPUT_PROMPT, SD_OUTPUT_REQUEST = 60, 0.4, 0.3


def natural_lengths(prompt_effect: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """GSM8K answers' natural lengths: a per-prompt effect and per-request noise around the median."""
    raw = GSM8K_OUTPUT_MEDIAN * np.exp(prompt_effect + rng.normal(0, SD_OUTPUT_REQUEST, prompt_effect.size))
    return np.clip(np.round(raw), 2, NATURAL_CAP)


def draw(n: int, rng: np.random.Generator) -> tuple[list[tuple[str, str, str]], list[CellArrays]]:
    """Every cell's arrays for `n` prompts per content."""
    levels, arrays = [], []
    for content in (SYNTHETIC, SYNTHETIC_MATCHED, GSM8K):
        prompt_accept = rng.normal(0, SD_PROMPT, n)
        prompt_output = rng.normal(0, SD_OUTPUT_PROMPT, n)
        for cell in cells((content,)):
            accept, speedup = LEVELS[cell.levels]
            if cell.length == FIXED:
                plain_t = spec_t = np.full(n, FIXED_TOKENS, dtype=float)
            elif content == GSM8K:
                plain_t = natural_lengths(prompt_output, rng)
                spec_t = plain_t if cell.sampling == GREEDY else natural_lengths(prompt_output, rng)
            else:  # random-token prompts run to the cap
                plain_t = spec_t = np.full(n, NATURAL_CAP, dtype=float)
            noise = rng.normal(0, SD_REQUEST, n)
            length = 1 + (accept - 1) * np.exp(prompt_accept + noise - (SD_PROMPT**2 + SD_REQUEST**2) / 2)
            plain_tpot = PLAIN_TPOT_S[content] * np.exp(rng.normal(0, SD_TPOT, n))
            spec_tpot = PLAIN_TPOT_S[content] * np.exp(rng.normal(0, SD_TPOT, n))
            round_s = spec_tpot * accept / speedup * np.exp(rng.normal(0, SD_ROUND, n))
            rounds = (spec_t - 1) / length
            levels.append(cell.levels)
            arrays.append(CellArrays(plain_t - 1, (plain_t - 1) * plain_tpot, spec_t - 1, rounds * round_s,
                                     spec_t - 1, rounds, length, "server"))
    return levels, arrays


def truth() -> tuple[list, np.ndarray]:
    levels, arrays = draw(TRUTH_PROMPTS, np.random.default_rng(12345))
    keys, sizes, statistic = design_statistic(levels, arrays)
    return keys, np.asarray(statistic(*(np.arange(n) for n in sizes.values())), dtype=float)


def replicate(job: tuple[int, int, int, np.ndarray]) -> np.ndarray:
    """Whether each interval of replication `rep` at size `n` covers the truth (NaN: no interval)."""
    n, rep, n_resamples, true = job
    levels, arrays = draw(n, np.random.default_rng([n, rep]))
    _, sizes, statistic = design_statistic(levels, arrays)
    _, low, high = bootstrap_intervals(statistic, sizes, n_resamples, seed=rep)
    return np.where(np.isfinite(low) & np.isfinite(high), (low <= true) & (true <= high), np.nan)


def kind(key: tuple) -> str:
    return key[2] if key[0] == "cell" else f"{key[2]} / {share_kind(key[3])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="6,12,24,48,96")
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="gap_coverage.csv")
    args = parser.parse_args()
    keys, true = truth()
    rows = []
    with Pool(args.workers) as pool:
        for n in (int(s) for s in args.sizes.split(",")):
            jobs = [(n, rep, args.resamples, true) for rep in range(args.replications)]
            covered = np.array(pool.map(replicate, jobs, chunksize=10))
            for key, column in zip(keys, covered.T):
                if key[0] == "cell" and key[2] not in FIGURES:
                    continue
                formed = column[np.isfinite(column)]
                rows.append({"prompts": n, "kind": kind(key), "interval": " ".join(map(str, key[1:])),
                             "coverage": formed.mean() if formed.size else math.nan, "formed": formed.size})
            print(f"n={n} done", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    worst = table.groupby(["kind", "prompts"])["coverage"].min().unstack("prompts")
    print(worst.map(lambda c: f"{c:.3f}").to_string())
    need = {k: next((n for n in worst.columns if (worst.loc[k, n:] >= 0.90).all()), None) for k in worst.index}
    print("MIN_PROMPTS:", need)


if __name__ == "__main__":
    main()
