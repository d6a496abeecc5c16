"""A bf16 checkpoint's own next-token log-probabilities, computed with torch and transformers.

Run with the Python of a server environment (the harness itself never imports torch):

    python reference_logprobs.py REQUEST_JSON OUT_NPZ MODEL_DIR [MODEL_DIR ...]

It reads {"sequences": [{"ids": [...], "prefixes": [...], "support": [[...], ...]}]}: for
each prefix length n, the distribution of the token after `ids[:n]` (one forward pass per
sequence, teacher forced). It writes, per model m in the order given, `support_m` (the
log-probabilities of the full-vocabulary softmax at the `support` ids, one row per prefix) and
`argmax_m` (the top token of each row), all sequences' rows concatenated.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def logprobs(request_json: str, out_npz: str, *model_dirs: str) -> None:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    sequences = json.loads(Path(request_json).read_text(encoding="utf-8"))["sequences"]
    arrays = {}
    for m, folder in enumerate(model_dirs):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
        support, argmax = [], []
        for seq in sequences:
            with torch.inference_mode():
                logits = model(torch.tensor([seq["ids"]])).logits[0].float()
            rows = torch.tensor(seq["prefixes"]) - 1  # the logits after ids[:n] sit at index n - 1
            full = torch.log_softmax(logits[rows], dim=-1)
            support.append(torch.gather(full, 1, torch.tensor(seq["support"])).numpy())
            argmax.append(full.argmax(dim=-1).numpy())
        arrays[f"support_{m}"] = np.concatenate(support).astype(np.float32)
        arrays[f"argmax_{m}"] = np.concatenate(argmax).astype(np.int64)
        del model
    np.savez(out_npz, **arrays)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    logprobs(*sys.argv[1:])
