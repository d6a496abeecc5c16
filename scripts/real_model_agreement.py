"""How far the converted bf16 checkpoint (SGLang) and the shipped GGUF (llama.cpp) agree, greedy.

    .venv/bin/python scripts/real_model_agreement.py [--questions 20] [--tokens 32]

Launches the real-model profiles `cpu-real` (SGLang, the converted checkpoint) and
`llamacpp-cpu-real` (llama.cpp, the Q4_1 GGUF), sends the first GSM8K test questions as one chat
turn each, greedy, to both, and prints how many leading tokens the answers share, with the date,
host and load: the figures docs/real-model.md quotes and its end-to-end test's tolerance rests on.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections import Counter

from harness.run.embedded import embedded_server
from harness.testbed.conversion_check import chat_prompt_ids, leading_agreement
from workloads.gsm8k import load_gsm8k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    questions = [row["question"] for row in load_gsm8k("vendored").test[:args.questions]]
    load_before = os.getloadavg()
    with embedded_server("cpu-real", log_name="agreement-sglang") as sglang, \
            embedded_server("llamacpp-cpu-real", log_name="agreement-llamacpp") as llamacpp:
        prompts = chat_prompt_ids(sglang.model_dir, questions)
        found = leading_agreement(("sglang", sglang.base_url), ("llamacpp", llamacpp.base_url), prompts, args.tokens)
    print(f"{datetime.date.today()} {platform.node()} load before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    print(f"{len(prompts)} GSM8K questions, greedy, {args.tokens} tokens: leading tokens shared per question "
          f"{found.leading}")
    print(f"median {found.median:.1f}; whole answer shared by {found.share_at_least(args.tokens):.0%}; "
          f"at least 8 tokens by {found.share_at_least(8):.0%}; at least 4 by {found.share_at_least(4):.0%}")
    print("histogram (tokens shared: questions):", dict(sorted(Counter(found.leading).items())))


if __name__ == "__main__":
    main()
