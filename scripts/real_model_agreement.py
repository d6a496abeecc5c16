"""How closely the converted bf16 checkpoint matches the shipped GGUF, and how far planted breaks fall.

    .venv/bin/python scripts/real_model_agreement.py [--answers 8] [--breaks qk-permuted,rope-base,vocab-shifted]
    .venv/bin/python scripts/real_model_agreement.py --greedy [--questions 20] [--tokens 32]

Serves the GGUF with the real-model profile `llamacpp-cpu-real` and prints, with the date, host
and load, the figures docs/real-model.md quotes and the end-to-end test's thresholds rest on:
- the tokenizer: texts of `TOKENIZER_TEXTS` whose ids differ between the checkpoint's tokenizer.json
  and llama.cpp's `/tokenize`, for the checkpoint and for a tokenizer with the byte-level split
  alone (the loader's own output, the planted tokenizer break);
- next-token distributions teacher forced along the first GSM8K test answers: per answer, top-1
  agreement and mean KL(llama.cpp || checkpoint) over llama.cpp's top-20, for the checkpoint and
  for each planted break (`harness/testbed/planted_breaks.py`).
`--greedy` instead compares greedy continuations of SGLang (`cpu-real`, the checkpoint) and
llama.cpp: leading tokens shared per question.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness.run.embedded import embedded_server
from harness.testbed import conversion_check as cc
from harness.testbed.planted_breaks import BREAKS, plant_break
from harness.testbed.real_model import ensure_real_hf
from workloads.gsm8k import load_gsm8k


def distributions(args, hf: Path, base_url: str, tmp: Path) -> None:
    rows = load_gsm8k("vendored").test[:args.answers]
    sequences = cc.teacher_forced(hf, [r["question"] for r in rows], [r["answer"] for r in rows])
    started = time.perf_counter()
    top_ids, top_logprobs = cc.llamacpp_top(base_url, sequences)
    print(f"llama.cpp: {len(top_ids)} positions over {len(sequences)} answers in {time.perf_counter() - started:.0f} s")
    breaks = [b for b in args.breaks.split(",") if b]
    folders = [hf, *(plant_break(b, hf, tmp / b) for b in breaks)]
    started = time.perf_counter()
    references = cc.reference_logprobs(folders, sequences, top_ids)
    print(f"checkpoints (torch): {time.perf_counter() - started:.0f} s")
    for name, reference in zip(["correct", *breaks], references):
        found = cc.next_token_agreement(top_ids, top_logprobs, reference, sequences)
        per = found.per_sequence()
        print(f"{name}: pooled top-1 {found.top1_rate:.3f}, mean KL {found.mean_kl:.4f}, "
              f"median KL {float(sorted(found.kl)[len(found.kl) // 2]):.4f}, passes {found.passes()}")
        print(f"  per answer top-1 {[round(t, 3) for t, _ in per]}")
        print(f"  per answer mean KL {[round(k, 4) for _, k in per]}")


def greedy(args) -> None:
    from harness.testbed.conversion_check import chat_prompt_ids, leading_agreement

    questions = [row["question"] for row in load_gsm8k("vendored").test[:args.questions]]
    with embedded_server("cpu-real", log_name="agreement-sglang") as sglang, \
            embedded_server("llamacpp-cpu-real", log_name="agreement-llamacpp") as llamacpp:
        prompts = chat_prompt_ids(sglang.model_dir, questions)
        found = leading_agreement(("sglang", sglang.base_url), ("llamacpp", llamacpp.base_url), prompts, args.tokens)
    print(f"{len(prompts)} GSM8K questions, greedy, {args.tokens} tokens: leading tokens shared per question "
          f"{found.leading}")
    print(f"median {found.median:.1f}; whole answer shared by {found.share_at_least(args.tokens):.0%}; "
          f"at least 8 tokens by {found.share_at_least(8):.0%}; at least 4 by {found.share_at_least(4):.0%}")
    print("histogram (tokens shared: questions):", dict(sorted(Counter(found.leading).items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--breaks", default=",".join(BREAKS))
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC {platform.node()} "
          f"load before {load_before[0]:.2f}")
    if args.greedy:
        greedy(args)
    else:
        hf = ensure_real_hf()
        with embedded_server("llamacpp-cpu-real", log_name="agreement-llamacpp") as llamacpp, \
                tempfile.TemporaryDirectory(prefix="planted-") as tmp:
            tokenizer = hf / "tokenizer.json"
            for name, path in (("checkpoint", tokenizer), ("byte-level only", cc.byte_level_only(tokenizer, Path(tmp) / "t.json"))):
                differ = cc.tokenizer_mismatches(path, llamacpp.base_url)
                print(f"tokenizer {name}: {len(differ)} of {len(cc.TOKENIZER_TEXTS)} texts differ "
                      f"{[text[:24] for text, _, _ in differ]}")
            distributions(args, hf, llamacpp.base_url, Path(tmp))
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
