"""Score kept drafter weights with the recipe's held-out scorer, on prompts of one's choice.

    python -m harness.testbed.drafter.score --target REAL_HF_DIR [--weights FILE] [--heldout 6] [--new-tokens 64]

Tokens a round (3 drafts) along the model's greedy continuations of the first `--heldout` GSM8K test
questions (five-shot, cut where a server stops) and as many new random-token prompts, exactly as
`train.py` scores after training; `weights/training.json`'s `heldout_e2e_prompts` is this command
with its defaults (the prompts tests/e2e/test_drafter.py sends).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from harness.testbed.drafter import artifact, train
from harness.testbed.drafter.eagle3 import DraftShape, Eagle3Draft


def load_draft(model, weights: Path) -> tuple[Eagle3Draft, torch.Tensor]:
    tensors = artifact.read_tensors(weights)
    d2t = tensors.pop("d2t").long()
    draft_ids = d2t + torch.arange(len(d2t))
    draft = Eagle3Draft(DraftShape.of_target(model.config, len(draft_ids)))
    head = model.get_output_embeddings().weight[draft_ids].float()
    draft.load_state_dict({**{k: v.float() for k, v in tensors.items()}, "lm_head.weight": head})
    return draft.to(model.device).eval(), draft_ids.to(model.device)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", type=Path, required=True)
    p.add_argument("--weights", type=Path, default=artifact.WEIGHTS)
    p.add_argument("--device", default="cpu")
    p.add_argument("--heldout", type=int, default=6)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--synthetic-len", type=int, default=64)
    p.add_argument("--gen-batch", type=int, default=16)
    args = p.parse_args(argv)
    model, tokenizer = train.load_target(args.target, args.device)
    draft, draft_ids = load_draft(model, args.weights)
    print(json.dumps(train.heldout(model, tokenizer, draft, draft_ids, args)))


if __name__ == "__main__":
    main()
