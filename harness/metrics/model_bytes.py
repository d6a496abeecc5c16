"""Bytes of weights one decode step reads at batch 1, from a model's config.json.

At batch 1 every decode step reads each weight it uses once: the attention projections of every
layer, the dense FFN or, in a mixture-of-experts layer, the router, the `experts_per_token` routed
experts and the shared experts, and the whole LM head; of the embedding table only one row. Each
part carries its parameter count, the dtype assumed for it and where its shape came from, so the
total is never shown without what it assumes.

Config keys read (Hugging Face names; aliases of DeepSeek, Qwen, Mixtral and Bailing configs):
num_hidden_layers, hidden_size, vocab_size, tie_word_embeddings, num_attention_heads,
num_key_value_heads, head_dim, intermediate_size; n_routed_experts / num_experts /
num_local_experts, num_experts_per_tok, n_shared_experts / num_shared_experts,
moe_intermediate_size, shared_expert_intermediate_size, first_k_dense_replace; MLA: q_lora_rank,
kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; layer kinds: layer_types
(linear_attention / full_attention) or linear_attn_config (kda_layers, full_attn_layers).
A config may add `active_parameters` (a model card's figure, embedding table and LM head included):
what the parts above leave of it is counted as one more part at the body's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Bytes per weight. MXFP4: 4-bit E2M1 values plus one 8-bit E8M0 scale per 32 (4.25 bits);
# NVFP4: plus one FP8 scale per 16 (4.5 bits); fp4/int4: the bare 4 bits. FP8 per-row or
# per-tensor scales are negligible.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
               "mxfp4": 4.25 / 8, "nvfp4": 4.5 / 8, "fp4": 0.5, "int4": 0.5}


@dataclass(frozen=True)
class Part:
    """One group of weights read per decode step."""

    name: str
    parameters: float
    dtype: str
    source: str

    @property
    def bytes(self) -> float:
        """`parameters * DTYPE_BYTES[dtype]`."""
        return self.parameters * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class WeightDtypes:
    """Dtypes assumed for the weights: `body` (every quantized linear layer), `lm_head`,
    `unquantized` (embedding, router and any module the checkpoint leaves out of quantization)."""

    body: str
    lm_head: str
    unquantized: str = "bf16"


def first(config: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    """The value of the first of `names` that the config sets (not None)."""
    return next((config[n] for n in names if config.get(n) is not None), default)


def layer_kinds(config: Mapping[str, Any]) -> dict[str, int]:
    """Layers per attention kind: `linear`, `mla` (kv_lora_rank or use_mla set) or `full`."""
    layers = int(config["num_hidden_layers"])
    softmax = "mla" if config.get("kv_lora_rank") or config.get("use_mla") else "full"
    if isinstance(config.get("layer_types"), list):
        linear = sum("linear" in str(kind) for kind in config["layer_types"])
    elif isinstance(config.get("linear_attn_config"), Mapping):
        linear = len(config["linear_attn_config"].get("kda_layers") or [])
    else:
        linear = 0
    return {kind: n for kind, n in (("linear", linear), (softmax, layers - linear)) if n}


def attention_parameters(config: Mapping[str, Any], kind: str) -> float:
    """Projection weights of one attention layer; NaN when the config lacks the shapes.

    full (GQA): `h*nh*d + 2*h*nkv*d + nh*d*h`; MLA: `h*ql + ql*nh*(dn+dr)` (or `h*nh*(dn+dr)`
    without q_lora_rank) `+ h*(kvl+dr) + kvl*nh*(dn+dv) + nh*dv*h`; linear attention: q, k, v, o
    of `linear_attn_config` heads x head_dim (gates and short convolutions not counted).
    """
    h, nh = config["hidden_size"], config.get("num_attention_heads")
    if kind == "full" and nh:
        d = first(config, "head_dim", default=h // nh)
        return h * nh * d + 2 * h * first(config, "num_key_value_heads", default=nh) * d + nh * d * h
    if kind == "mla" and nh and config.get("qk_nope_head_dim"):
        dn, dr, dv, kvl = (config[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"))
        ql = config.get("q_lora_rank")
        q = h * ql + ql * nh * (dn + dr) if ql else h * nh * (dn + dr)
        return q + h * (kvl + dr) + kvl * nh * (dn + dv) + nh * dv * h
    linear = config.get("linear_attn_config") or {}
    if kind == "linear" and linear.get("num_heads") and linear.get("head_dim"):
        return 4 * h * linear["num_heads"] * linear["head_dim"]
    return math.nan


def ffn_parts(config: Mapping[str, Any], dtypes: WeightDtypes) -> list[Part]:
    """Dense FFN layers and, for MoE, the router and the experts one token uses (gated FFNs:
    3 matrices of hidden x intermediate each)."""
    h, layers = config["hidden_size"], int(config["num_hidden_layers"])
    experts = first(config, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    if not experts:
        return [Part(f"dense FFN ({layers} layers)", layers * 3 * h * config["intermediate_size"], dtypes.body,
                     "config: intermediate_size")]
    dense = int(first(config, "first_k_dense_replace", default=0))
    moe, top_k, inter = layers - dense, config["num_experts_per_tok"], config["moe_intermediate_size"]
    shared = first(config, "n_shared_experts", "num_shared_experts", default=0)
    shared_inter = first(config, "shared_expert_intermediate_size", default=shared * inter)
    parts = [Part(f"routed experts ({top_k} of {experts} per layer, {moe} layers)", moe * top_k * 3 * h * inter,
                  dtypes.body, "config: num_experts_per_tok, moe_intermediate_size"),
             Part(f"router ({moe} layers)", moe * h * experts, dtypes.unquantized, "config: experts x hidden_size")]
    if shared_inter:
        parts.append(Part(f"shared experts ({shared or 1} per layer, {moe} layers)", moe * 3 * h * shared_inter,
                          dtypes.body, "config: shared experts x moe_intermediate_size"))
    if dense:
        parts.append(Part(f"dense FFN ({dense} layers)", dense * 3 * h * config["intermediate_size"], dtypes.body,
                          "config: first_k_dense_replace, intermediate_size"))
    return parts


def weight_parts(config: Mapping[str, Any], dtypes: WeightDtypes) -> list[Part]:
    """Every part of the weights one decode step reads at batch 1 (see the module docstring)."""
    h, vocab = config["hidden_size"], config["vocab_size"]
    tied = bool(config.get("tie_word_embeddings"))
    parts = [Part("embedding (one row per token)", h, dtypes.unquantized, "config: hidden_size"),
             Part("LM head" + (" (tied to the embedding)" if tied else ""), vocab * h, dtypes.lm_head,
                  "config: vocab_size x hidden_size")]
    for kind, n in layer_kinds(config).items():
        per_layer = attention_parameters(config, kind)
        if math.isfinite(per_layer):
            parts.append(Part(f"attention, {kind} ({n} layers)", n * per_layer, dtypes.body, "config: heads, head dims"))
    parts += ffn_parts(config, dtypes)
    return parts + residual_part(config, parts, dtypes)


def residual_part(config: Mapping[str, Any], parts: list[Part], dtypes: WeightDtypes) -> list[Part]:
    """With `active_parameters` stated: `active - embedding table - counted parts` as one part
    (attention whose shapes the config lacks, norms, any dense layers) at the body's dtype."""
    active = config.get("active_parameters")
    if not active:
        return []
    embedding_table = config["vocab_size"] * config["hidden_size"]
    counted = sum(p.parameters for p in parts[1:])  # parts[0] is the embedding row
    rest = active - embedding_table - counted
    return [Part("rest of the stated active parameters", rest, dtypes.body,
                 f"active_parameters {active:.4g} - embedding table - parts above")]


def kv_cache_bytes(config: Mapping[str, Any], context_tokens: float, kv_bytes: float) -> tuple[float, str]:
    """KV cache read by one decode step at `context_tokens` of context, and how it was counted.

    full attention: `layers * 2 * num_key_value_heads * head_dim * context * kv_bytes`; MLA:
    `layers * (kv_lora_rank + qk_rope_head_dim) * context * kv_bytes`. Linear-attention layers keep
    a fixed-size state instead; it is counted only where `linear_attn_config` gives heads and
    head_dim (`heads * head_dim^2` fp32 values per layer). NaN where the shapes are missing.
    """
    total, notes = 0.0, []
    for kind, n in layer_kinds(config).items():
        if kind == "full" and config.get("num_attention_heads"):
            nh = config["num_attention_heads"]
            width = 2 * first(config, "num_key_value_heads", default=nh) * first(
                config, "head_dim", default=config["hidden_size"] // nh)
            total += n * width * context_tokens * kv_bytes
        elif kind == "mla" and config.get("qk_rope_head_dim"):
            total += n * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * context_tokens * kv_bytes
        elif kind == "linear" and (config.get("linear_attn_config") or {}).get("head_dim"):
            linear = config["linear_attn_config"]
            total += n * linear["num_heads"] * linear["head_dim"] ** 2 * 4
        else:
            return math.nan, f"{kind} attention: the config gives no cache shape"
        notes.append(f"{kind} x{n}")
    return total, f"{', '.join(notes)} at {context_tokens:.0f} tokens of context, {kv_bytes:g} B per value"
