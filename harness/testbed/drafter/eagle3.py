"""The EAGLE-3 draft network: one decoder layer over (next token's embedding, fused target features).

The same computation as SGLang's and vLLM's `llama_eagle3` and llama.cpp's `eagle3` graph:
- the encoder fuses the target's residual stream entering layers 2, n/2 and n-3 (the default ids
  both SGLang and llama.cpp read as layer inputs) through `fc` (3 x hidden -> hidden);
- the decoder normalises the token embedding (`input_layernorm`) and the fused features
  (`hidden_norm`), attends over their concatenation (q, k, v read 2 x hidden), adds the raw features
  as the residual, runs the MLP, and returns the pre-norm state (the next draft step's features)
  and logits over a reduced draft vocabulary (`lm_head`, rows of the target's tied head, frozen).

Training unrolls `steps` draft steps (training-time test): step k at position i takes the token
k + 1 places ahead and the previous step's pre-norm state at i, and attends to step 0's keys at
positions <= i plus its own earlier steps' keys at i, which is what an engine's draft KV cache
holds when it chains drafts. Torch is imported by the recipe's machine only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class DraftShape:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rms_eps: float
    rope_theta: float
    target_layers: int
    draft_vocab: int

    @classmethod
    def of_target(cls, config, draft_vocab: int) -> DraftShape:
        """The draft layer copies the target's block shape (so its last block can seed it)."""
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rope = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
        return cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
                   config.intermediate_size, config.rms_norm_eps, float(rope), config.num_hidden_layers, draft_vocab)

    @property
    def feature_layers(self) -> tuple[int, int, int]:
        """Indices into a Hugging Face `hidden_states` tuple (entry i = the input of layer i)."""
        n = self.target_layers
        return (2, n // 2, n - 3)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding in Hugging Face's half-split layout; x is (batch, heads, time, head_dim)."""
    half = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.float()[:, None] * freqs[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, shape: DraftShape) -> None:
        super().__init__()
        self.shape = shape
        width = 2 * shape.hidden
        self.q_proj = nn.Linear(width, shape.heads * shape.head_dim, bias=False)
        self.k_proj = nn.Linear(width, shape.kv_heads * shape.head_dim, bias=False)
        self.v_proj = nn.Linear(width, shape.kv_heads * shape.head_dim, bias=False)
        self.o_proj = nn.Linear(shape.heads * shape.head_dim, shape.hidden, bias=False)

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, heads, self.shape.head_dim).transpose(1, 2)

    def project(self, x: torch.Tensor, positions: torch.Tensor):
        s = self.shape
        q = rotate(self._split(self.q_proj(x), s.heads), positions, s.rope_theta)
        k = rotate(self._split(self.k_proj(x), s.kv_heads), positions, s.rope_theta)
        v = self._split(self.v_proj(x), s.kv_heads)
        repeat = s.heads // s.kv_heads
        return q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, earlier: list) -> tuple[torch.Tensor, tuple]:
        """`earlier`: (k, v) of the previous draft steps; [0] is step 0's, attended causally, the
        rest only at the query's own position (the chain an engine's draft KV cache holds)."""
        q, k, v = self.project(x, positions)
        scale = 1.0 / math.sqrt(self.shape.head_dim)
        if not earlier:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k0, v0 = earlier[0]
            t = q.shape[2]
            causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
            scores = [(q @ k0.transpose(-1, -2) * scale).masked_fill(~causal, float("-inf"))]
            values = [v0]
            for kk, vv in [*earlier[1:], (k, v)]:
                scores.append((q * kk).sum(-1, keepdim=True) * scale)
                values.append(vv)
            weights = torch.softmax(torch.cat(scores, dim=-1).float(), dim=-1).to(q.dtype)
            out = weights[..., :t] @ v0
            for j, vv in enumerate(values[1:]):
                out = out + weights[..., t + j: t + j + 1] * vv
        b, _, t, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), (k, v)


class MLP(nn.Module):
    def __init__(self, shape: DraftShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.up_proj = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.down_proj = nn.Linear(shape.intermediate, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    def __init__(self, shape: DraftShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden, shape.rms_eps)
        self.hidden_norm = RMSNorm(shape.hidden, shape.rms_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden, shape.rms_eps)
        self.mlp = MLP(shape)

    def forward(self, embeds, features, positions, earlier):
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(features)], dim=-1)
        attended, kv = self.self_attn(x, positions, earlier)
        mixed = attended + features
        return self.mlp(self.post_attention_layernorm(mixed)) + mixed, kv


class Eagle3Draft(nn.Module):
    """Parameter names are the EAGLE-3 checkpoint's (`fc`, `midlayer.*`, `norm`, `lm_head`)."""

    def __init__(self, shape: DraftShape) -> None:
        super().__init__()
        self.shape = shape
        self.fc = nn.Linear(3 * shape.hidden, shape.hidden, bias=False)
        self.midlayer = MidLayer(shape)
        self.norm = RMSNorm(shape.hidden, shape.rms_eps)
        self.lm_head = nn.Linear(shape.hidden, shape.draft_vocab, bias=False)
        self.lm_head.weight.requires_grad_(False)

    def unroll(self, embed: nn.Embedding, tokens: torch.Tensor, features: torch.Tensor, steps: int):
        """Draft logits of each step: step k at position i predicts token i + k + 2 from token
        i + k + 1 (teacher-forced: a later step counts only when the earlier ones were accepted)
        and the previous step's state. Returns a list of (batch, time - k - 2, draft_vocab)."""
        length = tokens.shape[1]
        state = self.fc(features)
        earlier: list = []
        logits = []
        for k in range(steps):
            usable = length - k - 2
            inputs = embed(tokens[:, k + 1: k + 1 + usable])
            positions = torch.arange(usable, device=tokens.device) + k
            state, kv = self.midlayer(inputs, state[:, :usable], positions,
                                      [(kk[:, :, :usable], vv[:, :, :usable]) for kk, vv in earlier])
            earlier.append(kv)
            logits.append(self.lm_head(self.norm(state)))
        return logits
