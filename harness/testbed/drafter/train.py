"""The recipe that distils the EAGLE-3 drafter from the real model's own continuations (GPU, minutes).

    python -m harness.testbed.drafter.train --target HF_DIR --out DIR [--device cuda] [--seconds S]

1. Prompts (`prompts`): GSM8K train questions, five-shot, and random-token prompts; each continued
   by the model itself, half greedily, half sampled as published (T 0.6, top_p 0.95, top_k 29).
2. The draft vocabulary: the `--draft-vocab` ids the model generated most often (`d2t`).
3. Training by KL to the model's next-token distribution (renormalised over the draft vocabulary),
   `--steps-ahead` chained draft steps weighted 1, 0.8, 0.64 (training-time test), target features
   computed on the fly; only continuation and question tokens count, never the shared shots.
4. Held-out score: GSM8K TEST questions and new random prompts, continued greedily; tokens a round
   with 3 drafts simulated exactly along those greedy outputs (`tokens_per_round`).
5. `DIR/drafter.safetensors` (the trained tensors and `d2t`), `DIR/training.json` (data, steps,
   losses, held-out figures, times).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from harness.testbed.drafter import prompts
from harness.testbed.drafter.eagle3 import DraftShape, Eagle3Draft
from harness.testbed.drafter.rounds import tokens_per_round
from workloads.gsm8k import STOP_STRINGS

SAMPLED = {"temperature": 0.6, "top_p": 0.95, "top_k": 29}
STEP_WEIGHTS = (1.0, 0.8, 0.64)


def load_target(folder: Path, device: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def cut_at_stop(tokenizer, continuation: list[int]) -> list[int]:
    """The continuation up to the first token whose text reaches a GSM8K stop string ("Question:"
    opens the model's next, unasked question): a server stops there, so no draft is made past it."""
    text = tokenizer.decode(continuation)
    found = [i for i in (text.find(stop) for stop in STOP_STRINGS) if i >= 0]
    if not found:
        return continuation
    end = min(found)
    for k in range(1, len(continuation) + 1):
        if len(tokenizer.decode(continuation[:k])) > end:
            return continuation[:k - 1]
    return continuation


@torch.no_grad()
def continue_prompts(model, tokenizer, prompt_ids: list[list[int]], new_tokens: int, sampled: bool,
                     batch: int, stop_at_eos: bool) -> list[tuple[list[int], list[int]]]:
    """(prompt, continuation) pairs; with `stop_at_eos` (GSM8K) a continuation ends where a server
    would stop it: after the end-of-sequence token, or before a stop string."""
    pairs = []
    eos = set(filter(None, [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")]))
    for start in range(0, len(prompt_ids), batch):
        chunk = prompt_ids[start:start + batch]
        padded = tokenizer.pad({"input_ids": chunk}, return_tensors="pt").to(model.device)
        options = dict(do_sample=True, **SAMPLED) if sampled else dict(do_sample=False)
        out = model.generate(**padded, max_new_tokens=new_tokens, min_new_tokens=0 if stop_at_eos else new_tokens,
                             pad_token_id=tokenizer.pad_token_id, **options)
        for ids, row in zip(chunk, out[:, padded["input_ids"].shape[1]:].tolist()):
            cut = next((i + 1 for i, t in enumerate(row) if t in eos), len(row)) if stop_at_eos else len(row)
            pairs.append((ids, cut_at_stop(tokenizer, row[:cut]) if stop_at_eos else row[:cut]))
    return pairs


def make_sequences(model, tokenizer, args) -> list[dict]:
    """Training sequences (token ids, the index from which the loss counts), made batch by batch in
    turn from the four groups (GSM8K / synthetic x greedy / sampled) until `--data-seconds` are spent,
    so a slower machine trains on fewer sequences of the same mix instead of running out of time."""
    texts = prompts.gsm8k_texts("train", args.gsm8k, five_shot=args.shots == 5)
    gsm_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    shared = texts[0][:prompts.gsm8k_question_start(texts[0])]  # the five shots (if any), in every prompt
    loss_from = len(tokenizer(shared, add_special_tokens=False)["input_ids"])
    synth = prompts.random_token_prompts(args.target, args.synthetic, args.synthetic_len, prompts.TRAIN_STREAM)
    groups = [(gsm_ids[0::2], False, "gsm8k", loss_from), (gsm_ids[1::2], True, "gsm8k", loss_from),
              (synth[0::2], False, "synthetic", args.synthetic_len), (synth[1::2], True, "synthetic", args.synthetic_len)]
    batch = max(1, args.gen_batch // 4) if args.gen_batch >= 4 else 1
    out, start = [], time.monotonic()
    for offset in range(0, max(len(g[0]) for g in groups), batch):
        for ids_list, sampled, content, frm in groups:
            chunk = ids_list[offset:offset + batch]
            if not chunk or time.monotonic() - start > args.data_seconds:
                continue
            stop = content == "gsm8k"
            for ids, cont in continue_prompts(model, tokenizer, chunk, args.new_tokens, sampled, batch, stop):
                out.append({"ids": ids + cont, "loss_from": frm, "content": content, "sampled": sampled})
    return out


def draft_vocabulary(sequences: list[dict], size: int, vocab: int) -> torch.Tensor:
    """The `size` target ids seen most often where the loss counts, ascending (the draft's d2t)."""
    counts = np.zeros(vocab, dtype=np.int64)
    for s in sequences:
        np.add.at(counts, np.asarray(s["ids"][s["loss_from"]:]), 1)
    top = np.argsort(-counts, kind="stable")[:size]
    return torch.tensor(np.sort(top), dtype=torch.long)


def seeded_draft(model, shape: DraftShape, draft_ids: torch.Tensor) -> Eagle3Draft:
    """Start from the target's last block (its features half of q/k/v), its final norm, and its
    head's rows for the draft vocabulary; fc starts as the identity on the deepest feature layer."""
    draft = Eagle3Draft(shape).to(model.device)
    block = model.model.layers[-1]
    h = shape.hidden
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj"):
            target = getattr(block.self_attn, name).weight
            mine = getattr(draft.midlayer.self_attn, name).weight
            mine.zero_()
            mine[:, h:] = target.float()
            mine[:, :h] = target.float() * 0.5
        draft.midlayer.self_attn.o_proj.weight.copy_(block.self_attn.o_proj.weight.float())
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(draft.midlayer.mlp, name).weight.copy_(getattr(block.mlp, name).weight.float())
        draft.midlayer.post_attention_layernorm.weight.copy_(block.post_attention_layernorm.weight.float())
        draft.midlayer.input_layernorm.weight.copy_(block.input_layernorm.weight.float())
        draft.midlayer.hidden_norm.weight.copy_(block.input_layernorm.weight.float())
        draft.norm.weight.copy_(model.model.norm.weight.float())
        draft.fc.weight.zero_()
        draft.fc.weight[:, 2 * h:] = torch.eye(h)
        draft.lm_head.weight.copy_(model.get_output_embeddings().weight[draft_ids].float())
    return draft


def batch_of(sequences: list[dict], device: str, pad: int):
    length = max(len(s["ids"]) for s in sequences)
    tokens = torch.full((len(sequences), length), pad, dtype=torch.long)
    counted = torch.zeros((len(sequences), length), dtype=torch.bool)
    for row, s in enumerate(sequences):
        tokens[row, :len(s["ids"])] = torch.tensor(s["ids"])
        counted[row, s["loss_from"]:len(s["ids"])] = True
    return tokens.to(device), counted.to(device)


@torch.no_grad()
def target_view(model, shape: DraftShape, tokens: torch.Tensor, draft_ids: torch.Tensor):
    """The fused features (batch, time, 3 x hidden) and the target's log-probabilities over the
    draft vocabulary and its full-vocabulary top-1, at every position."""
    out = model(input_ids=tokens, output_hidden_states=True)
    features = torch.cat([out.hidden_states[i] for i in shape.feature_layers], dim=-1)
    return features, out.logits[..., draft_ids].float().log_softmax(-1), out.logits.argmax(-1)


def step_losses(draft, embed, tokens, counted, features, target_logp, target_top, draft_ids, steps: int):
    """Per draft step: the KL-style loss and the greedy match rate over counted positions."""
    results = []
    for k, logits in enumerate(draft.unroll(embed, tokens, features.to(torch.bfloat16), steps)):
        usable = logits.shape[1]
        predicted = slice(k + 1, k + 1 + usable)  # the target's distribution at the predicted token's parent
        mask = counted[:, k + 2: k + 2 + usable]
        teacher = target_logp[:, predicted]
        kl = (teacher.exp() * (teacher - logits.float().log_softmax(-1))).sum(-1)
        loss = (kl * mask).sum() / mask.sum().clamp(min=1)
        match = (draft_ids[logits.argmax(-1)] == target_top[:, predicted]) & mask
        results.append((loss, match.sum().item() / max(mask.sum().item(), 1)))
    return results


def train(model, draft, sequences, draft_ids, args) -> list[dict]:
    shape, embed = draft.shape, model.get_input_embeddings()
    params = [p for p in draft.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    rng, log, start = random.Random(0), [], time.monotonic()
    for step in range(args.steps):
        progress = max(step / args.steps, (time.monotonic() - start) / args.seconds)  # whichever ends first
        if progress >= 1:
            break
        lr = args.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * progress))
        for group in optimizer.param_groups:
            group["lr"] = lr
        tokens, counted = batch_of(rng.sample(sequences, args.batch), model.device, 0)
        features, target_logp, target_top = target_view(model, shape, tokens, draft_ids)
        with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16):
            per_step = step_losses(draft, embed, tokens, counted, features, target_logp, target_top, draft_ids,
                                   args.steps_ahead)
        loss = sum(w * loss for w, (loss, _) in zip(STEP_WEIGHTS, per_step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if step % 25 == 0 or step == args.steps - 1:
            row = {"step": step, "seconds": round(time.monotonic() - start, 1), "loss": round(loss.item(), 4),
                   "match": [round(m, 3) for _, m in per_step]}
            log.append(row)
            print(json.dumps(row), flush=True)
    return log


@torch.no_grad()
def heldout(model, tokenizer, draft, draft_ids, args) -> dict:
    """Tokens a round (3 drafts) along the model's greedy continuations of held-out prompts."""
    texts = prompts.gsm8k_texts("test", args.heldout)
    gsm = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    synth = prompts.random_token_prompts(args.target, args.heldout, args.synthetic_len, prompts.HELDOUT_STREAM)
    figures = {}
    for name, ids, stop in (("gsm8k", gsm, True), ("synthetic", synth, False)):
        pairs = continue_prompts(model, tokenizer, ids, args.new_tokens, False, args.gen_batch, stop)
        rounds = []
        for prompt, cont in pairs:
            seq = [{"ids": prompt + cont, "loss_from": len(prompt)}]
            tokens, counted = batch_of(seq, model.device, 0)
            features, target_logp, target_top = target_view(model, draft.shape, tokens, draft_ids)
            with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16):
                logits = draft.unroll(model.get_input_embeddings(), tokens, features.to(torch.bfloat16), 3)
            matches = [(draft_ids[lg.argmax(-1)][0] == target_top[0, k + 1: k + 1 + lg.shape[1]]).tolist()
                       for k, lg in enumerate(logits)]
            rounds.append(tokens_per_round(matches, first=len(prompt) - 1, last=len(prompt) + len(cont) - 1))
        # a prompt answered in fewer than two tokens has no round: None, and left out of the mean
        scored = [r for r in rounds if not math.isnan(r)]
        figures[name] = {"prompts": len(pairs), "prompts_with_rounds": len(scored),
                         "tokens_per_round": round(float(np.mean(scored)), 3) if scored else None,
                         "per_prompt": [None if math.isnan(r) else round(r, 3) for r in rounds]}
    return figures


def export(draft: Eagle3Draft, draft_ids: torch.Tensor, out: Path) -> Path:
    """The trained tensors in bf16 and `d2t` (EAGLE-3's offsets: target id = index + d2t[index]).
    The frozen head is not kept: it is rows of the target's embedding, rebuilt by `artifact`."""
    from safetensors.torch import save_file

    tensors = {name: t.detach().to(torch.bfloat16).contiguous().cpu() for name, t in draft.state_dict().items()
               if name != "lm_head.weight"}
    tensors["d2t"] = (draft_ids - torch.arange(len(draft_ids), device=draft_ids.device)).cpu()
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "drafter.safetensors"), metadata={"format": "pt"})
    return out / "drafter.safetensors"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", type=Path, required=True, help="the real model's Hugging Face folder")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gsm8k", type=int, default=None, help="train questions (default: all but the shots)")
    p.add_argument("--shots", type=int, choices=(0, 5), default=5, help="GSM8K training prompts' shots")
    p.add_argument("--synthetic", type=int, default=1024)
    p.add_argument("--synthetic-len", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=192)
    p.add_argument("--gen-batch", type=int, default=1024, help="prompts continued at once (a quarter per group)")
    p.add_argument("--data-seconds", type=float, default=180.0, help="stop making sequences after this long")
    p.add_argument("--draft-vocab", type=int, default=8192)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--seconds", type=float, default=240.0, help="stop training after this long")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--steps-ahead", type=int, default=3)
    p.add_argument("--heldout", type=int, default=48)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    torch.manual_seed(0)
    clock = {"start": time.monotonic()}
    model, tokenizer = load_target(args.target, args.device)
    data = make_sequences(model, tokenizer, args)
    clock["data_s"] = time.monotonic() - clock["start"]
    shape = DraftShape.of_target(model.config, args.draft_vocab)
    draft_ids = draft_vocabulary(data, args.draft_vocab, model.config.vocab_size).to(model.device)
    draft = seeded_draft(model, shape, draft_ids)
    log = train(model, draft, data, draft_ids, args)
    clock["train_s"] = time.monotonic() - clock["start"] - clock["data_s"]
    figures = heldout(model, tokenizer, draft.eval(), draft_ids, args)
    weights = export(draft, draft_ids, args.out)
    report = {"args": {k: str(v) for k, v in vars(args).items()}, "shape": vars(shape) | {},
              "sequences": len(data), "mix": {f"{c}-{'sampled' if smp else 'greedy'}": n
                                              for (c, smp), n in Counter((d["content"], d["sampled"]) for d in data).items()},
              "tokens": sum(len(s["ids"]) for s in data),
              "counted_tokens": sum(len(s["ids"]) - s["loss_from"] for s in data),
              "data_seconds": round(clock["data_s"], 1), "train_seconds": round(clock["train_s"], 1),
              "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
              "torch": torch.__version__, "log": log, "heldout": figures, "weights": weights.name}
    (args.out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("sequences", "tokens", "data_seconds", "train_seconds")}))
    print(json.dumps({k: v["tokens_per_round"] for k, v in figures.items()}))


if __name__ == "__main__":
    main()
