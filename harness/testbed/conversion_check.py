"""Is the converted checkpoint the model the GGUF holds? Tokenizers, next-token distributions and
greedy continuations, compared between llama.cpp (the GGUF) and the bf16 checkpoint.

The real model reaches SGLang and vLLM as a bf16 checkpoint dequantized from its Q4_1 GGUF, and
llama.cpp as the GGUF itself. They compute differently (bf16 weights and activations on one side,
Q4_1 weights with 8-bit activations on the other), so the question is how close, set against how
far copies with a known conversion error fall.

Checks, the first two with a planted defect that they must catch (docs/real-model.md has the figures):
- `tokenizer_mismatches`: the checkpoint's tokenizer.json against llama.cpp's `/tokenize` (the
  GGUF's own vocabulary and pre-tokenizer) on `TOKENIZER_TEXTS`; a correct conversion differs on none.
- `next_token_agreement`: teacher forced along chat-formatted answers, the next-token distribution
  at every answer position, llama.cpp's `n_probs` against the checkpoint's logits computed with
  torch (`reference_logprobs.py` in the SGLang environment): top-1 agreement, and the KL divergence
  KL(llama.cpp || checkpoint) over llama.cpp's top-`SUPPORT` tokens, both renormalized on them.
  `planted_breaks.plant_break` writes a copy of the checkpoint with a known conversion error.
- `leading_agreement`: the same token ids to two servers (greedy, no prompt cache), and per prompt
  how many leading tokens the two continuations share (both servers serve the same model).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from harness.chat import load_template, render
from harness.engines.registry import engine_named
from harness.engines.scoring import post_json
from harness.testbed.envs import TESTBED_DIR, env_python

REFERENCE = TESTBED_DIR / "reference_logprobs.py"
SUPPORT = 20  # llama.cpp's top tokens per position (`n_probs`) that the KL divergence is taken over
# Set between the measured per-answer figures of the correct checkpoint and of planted breaks
# (docs/real-model.md, `scripts/real_model_agreement.py`).
TOP1_AT_LEAST = 0.94  # correct copy 0.966-1.0 per answer; the nearest break (RoPE base) 0.822-0.903
MEAN_KL_AT_MOST = 0.03  # correct copy 0.0025-0.0073 nats per answer; RoPE base 0.115-0.191
TOKENIZER_TEXTS = (
    "0 1 12 123 1234 12345 3.14159 1,000,000 -42 2026-12-07 0x1F 1e-9 $18.50 50%",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
    "a  b   c    d\t\te\n\nf\n\n\n g \r\n   trailing   ",
    "    ",
    "\n",
    "naïve café Ünïcödé — “quotes” ‘single’ … ½ ² µ ß Æ ø",
    "x² y³ ¼ ⅓ ¾ Ⅻ ٣٤٥ ३४५ １２３ 2½ cups",
    "東京 日本語のテキスト 한국어 Ελληνικά русский العربية हिन्दी",
    "emoji 🚀🔥👍🏽 👨‍👩‍👧 ✓ ★ ∑ ∞ ≤ ≠",
    "def f(x):\n    return {'a': [x ** 2, x // 3]}  # comment\n\nclass A(B): pass\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] >> 1; }  /* C */ std::vector<int> v;",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text after end<|im_end|><|im_start|>",
    "don't won't I'm you're we've they'll she'd DON'T",
    "https://example.com/path?q=1&r=two#frag user@example.org",
)


@dataclass(frozen=True)
class Agreement:
    leading: list[int]  # per prompt, the tokens the two continuations share from the start
    max_new_tokens: int

    @property
    def median(self) -> float:
        return float(np.median(self.leading))

    def share_at_least(self, tokens: int) -> float:
        return float(np.mean([n >= tokens for n in self.leading]))


def chat_prompt_ids(model_dir: Path, questions: list[str]) -> list[list[int]]:
    """Each question as one user turn through the model's chat template, as token ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    template = load_template(model_dir)
    texts = [render(template, [{"role": "user", "content": q}]) for q in questions]
    return [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def leading_agreement(first: tuple[str, str], second: tuple[str, str], prompts: list[list[int]],
                      max_new_tokens: int, timeout_s: float = 600.0) -> Agreement:
    """Greedy continuations of every prompt on two servers, each given as (engine, base URL)."""
    with httpx.Client(timeout=timeout_s) as http:
        leading = []
        for ids in prompts:
            a, b = (engine_named(engine).greedy_ids(http, url, ids, max_new_tokens) for engine, url in (first, second))
            leading.append(common_prefix(a, b))
    return Agreement(leading, max_new_tokens)


def llamacpp_tokenize(http: httpx.Client, base_url: str, text: str) -> list[int]:
    """The GGUF's own tokenization (llama.cpp `/tokenize`): no BOS added, special tokens parsed."""
    body = {"content": text, "add_special": False, "parse_special": True}
    return [int(t) for t in post_json(http, base_url + "/tokenize", body)["tokens"]]


def tokenizer_mismatches(tokenizer_json: Path, base_url: str, texts=TOKENIZER_TEXTS) -> list[tuple[str, list, list]]:
    """(text, checkpoint ids, llama.cpp ids) for every text the two tokenize differently."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    with httpx.Client(timeout=60.0) as http:
        pairs = [(text, tokenizer.encode(text, add_special_tokens=False).ids, llamacpp_tokenize(http, base_url, text))
                 for text in texts]
    return [(text, ours, theirs) for text, ours, theirs in pairs if ours != theirs]


def byte_level_only(tokenizer_json: Path, out: Path) -> Path:
    """The tokenizer with its byte-level pre-tokenizer alone (what transformers' GGUF loader wrote
    before `gguf_to_hf.py` put the numeric split back): the planted tokenizer break."""
    tokenizer = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    steps = tokenizer["pre_tokenizer"].get("pretokenizers", [tokenizer["pre_tokenizer"]])
    tokenizer["pre_tokenizer"] = next(step for step in steps if step["type"] == "ByteLevel")
    out.write_text(json.dumps(tokenizer), encoding="utf-8")
    return out


@dataclass(frozen=True)
class Sequence:
    ids: list[int]  # chat prompt, then the answer and its end of turn
    prefixes: list[int]  # prefix lengths whose next token is scored: every answer position


def teacher_forced(model_dir: Path, questions: list[str], answers: list[str]) -> list[Sequence]:
    """Each question as one user turn through the chat template, its answer (calculator notes
    `<<...>>` removed) as the assistant's turn; the prompt and the answer tokenized apart, as a
    server would see the prompt."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    template = load_template(model_dir)
    sequences = []
    for question, answer in zip(questions, answers):
        prompt = tokenizer.encode(render(template, [{"role": "user", "content": question}]), add_special_tokens=False).ids
        reply = tokenizer.encode(re.sub(r"<<[^>]*>>", "", answer) + "<|im_end|>", add_special_tokens=False).ids
        sequences.append(Sequence(prompt + reply, list(range(len(prompt), len(prompt) + len(reply)))))
    return sequences


def llamacpp_top(base_url: str, sequences: list[Sequence], k: int = SUPPORT) -> tuple[np.ndarray, np.ndarray]:
    """llama.cpp's top-k (ids, log-probabilities of the full softmax) after every prefix, one row
    per prefix. Prefixes go in order with the prompt cache on, so each step evaluates one token."""
    ids, logprobs = [], []
    with httpx.Client(timeout=120.0) as http:
        for seq in sequences:
            for n in seq.prefixes:
                body = {"prompt": seq.ids[:n], "n_predict": 1, "temperature": 0.0, "n_probs": k,
                        "cache_prompt": True, "stream": False}
                top = post_json(http, base_url + "/completion", body)["completion_probabilities"][0]["top_logprobs"]
                ids.append([int(t["id"]) for t in top])
                logprobs.append([float(t["logprob"]) for t in top])
    return np.array(ids, dtype=np.int64), np.array(logprobs, dtype=np.float64)


def reference_logprobs(model_dirs: list[Path], sequences: list[Sequence], support: np.ndarray,
                       engine: str = "sglang") -> list[tuple[np.ndarray, np.ndarray]]:
    """Per checkpoint: (log-probabilities at the `support` ids, argmax over the full vocabulary),
    from one teacher-forced forward pass per sequence in the `engine` environment's torch."""
    with tempfile.TemporaryDirectory(prefix="reference-") as tmp:
        request, out = Path(tmp) / "request.json", Path(tmp) / "out.npz"
        rows = iter(support.tolist())
        request.write_text(json.dumps({"sequences": [
            {"ids": s.ids, "prefixes": s.prefixes, "support": [next(rows) for _ in s.prefixes]} for s in sequences]}))
        subprocess.run([str(env_python(engine)), str(REFERENCE), str(request), str(out),
                        *map(str, model_dirs)], check=True, capture_output=True, text=True)
        with np.load(out) as found:
            return [(found[f"support_{m}"].astype(np.float64), found[f"argmax_{m}"]) for m in range(len(model_dirs))]


@dataclass(frozen=True)
class NextToken:
    top1: np.ndarray  # per position: the checkpoint's argmax is llama.cpp's top token
    kl: np.ndarray  # per position: KL(llama.cpp || checkpoint) in nats over llama.cpp's top-k, renormalized
    sequence: np.ndarray  # per position: which sequence it belongs to

    @property
    def top1_rate(self) -> float:
        return float(self.top1.mean())

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())

    def per_sequence(self) -> list[tuple[float, float]]:
        """(top-1 agreement, mean KL) of each sequence."""
        return [(float(self.top1[self.sequence == s].mean()), float(self.kl[self.sequence == s].mean()))
                for s in np.unique(self.sequence)]

    def passes(self) -> bool:
        return self.top1_rate >= TOP1_AT_LEAST and self.mean_kl <= MEAN_KL_AT_MOST


def support_kl(p_logprobs: np.ndarray, q_logprobs: np.ndarray) -> np.ndarray:
    """Row by row, KL(P || Q) in nats of two distributions given as log-probabilities on the same
    support, each renormalized to sum to one there."""
    p = p_logprobs - np.logaddexp.reduce(p_logprobs, axis=1, keepdims=True)
    q = q_logprobs - np.logaddexp.reduce(q_logprobs, axis=1, keepdims=True)
    return (np.exp(p) * (p - q)).sum(axis=1)


def next_token_agreement(top_ids: np.ndarray, top_logprobs: np.ndarray, reference: tuple[np.ndarray, np.ndarray],
                         sequences: list[Sequence]) -> NextToken:
    """llama.cpp's top-k against one checkpoint's log-probabilities on the same ids and its argmax."""
    support, argmax = reference
    which = np.concatenate([np.full(len(s.prefixes), i) for i, s in enumerate(sequences)])
    return NextToken(argmax == top_ids[:, 0], support_kl(top_logprobs, support), which)
