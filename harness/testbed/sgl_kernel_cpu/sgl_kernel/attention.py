"""The two attention ops of SGLang's intel_amx backend, registered as `torch.ops.sgl_kernel.*`.

`sglang/srt/layers/attention/intel_amx_backend.py` calls them with the argument lists below. Only
what a plain decoder needs is provided: causal self-attention over the request's cached tokens,
grouped-query heads, an optional tanh logit cap, and the speculative verify tree mask. Sliding
windows, attention sinks, cross-attention and scaled (FP8) caches raise NotImplementedError.
Scores and the softmax are computed in float32.
"""

from __future__ import annotations

import math

import torch

_LIBRARY = torch.library.Library("sgl_kernel", "FRAGMENT")  # kept alive: the ops live as long as it does

_DECODE_SCHEMA = (
    "decode_attention_cpu(Tensor query, Tensor(a!) k_cache, Tensor(b!) v_cache, float k_scale, "
    "float v_scale, Tensor(c!) output, Tensor? key, Tensor? value, Tensor loc, Tensor attn_logits, "
    "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float sm_scale, float logit_cap, "
    "bool is_cross_attention, int sliding_window, Tensor? encoder_lens, Tensor? sinks) -> ()")
_EXTEND_SCHEMA = (
    "extend_attention_cpu(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, Tensor(a!) o_extend, "
    "Tensor k_buffer, Tensor v_buffer, float k_scale, float v_scale, Tensor req_to_token, "
    "Tensor req_pool_indices, Tensor seq_lens, Tensor extend_seq_lens, Tensor extend_start_loc, "
    "int max_len_extend, float sm_scale, float logit_cap, bool is_cross_attention, int sliding_window, "
    "Tensor? encoder_lens, Tensor? sinks, Tensor? tree_mask, bool is_causal) -> ()")


def _refuse_unsupported(op: str, cache: torch.Tensor, k_scale: float, v_scale: float, is_cross_attention: bool,
                        sliding_window: int, sinks: torch.Tensor | None) -> None:
    unsupported = {
        "a scaled (FP8) KV cache": cache.dtype not in (torch.bfloat16, torch.float16, torch.float32)
        or k_scale != 1.0 or v_scale != 1.0,
        "cross-attention": is_cross_attention,
        "a sliding window": sliding_window > 0,
        "attention sinks": sinks is not None,
    }
    for feature, asked in unsupported.items():
        if asked:
            raise NotImplementedError(f"sgl_kernel.{op} in the CPU test-bed stand-in does not support {feature}")


def _attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor | None,
            sm_scale: float, logit_cap: float) -> torch.Tensor:
    """softmax(cap(q . k * sm_scale)) . v for q [m, H, D], keys [s, Hkv, D], values [s, Hkv, Dv];
    query heads share key heads in groups of H / Hkv; `visible` [m, s] masks keys out (None: all)."""
    group = q.shape[1] // keys.shape[1]
    keys = keys.float().repeat_interleave(group, dim=1)
    values = values.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("mhd,shd->hms", q.float(), keys) * sm_scale
    if logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    if visible is not None:
        scores = scores.masked_fill(~visible, -math.inf)
    return torch.einsum("hms,shd->mhd", torch.softmax(scores, dim=-1), values)


def decode_attention_cpu(query, k_cache, v_cache, k_scale, v_scale, output, key, value, loc, attn_logits,
                         req_to_token, req_pool_indices, seq_lens, sm_scale, logit_cap, is_cross_attention,
                         sliding_window, encoder_lens, sinks) -> None:
    """SGLang `decode_attention_cpu` (sgl-kernel/csrc/cpu/decode.cpp): first store the new token's
    key and value at `loc` (when given), then for each request b, one query token attends over
    its cached tokens req_to_token[req_pool_indices[b], :seq_lens[b]]. `attn_logits` is the
    kernel's scratch space and is not needed here."""
    _refuse_unsupported("decode_attention_cpu", k_cache, k_scale, v_scale, is_cross_attention, sliding_window, sinks)
    if key is not None and value is not None:
        k_cache[loc.long()] = key.to(k_cache.dtype)
        v_cache[loc.long()] = value.to(v_cache.dtype)
    for b, (row, seq_len) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        slots = req_to_token[row, :seq_len].long()
        output[b:b + 1] = _attend(query[b:b + 1], k_cache[slots], v_cache[slots], None, sm_scale,
                                  logit_cap).to(output.dtype)


def _extend_visibility(prefix: int, extend: int, tree_mask: torch.Tensor | None, b: int,
                       is_causal: bool) -> torch.Tensor:
    """[extend, prefix + extend]: every prefix token is visible; among the new tokens, the tree
    mask's row (request b's n x n block, QLEN_ONLY layout) or else causal order decides."""
    visible = torch.ones(extend, prefix + extend, dtype=torch.bool)
    if tree_mask is not None:
        block = extend * extend
        visible[:, prefix:] = tree_mask.reshape(-1)[b * block:(b + 1) * block].view(extend, extend).bool()
    elif is_causal:
        visible[:, prefix:] = torch.ones(extend, extend, dtype=torch.bool).tril()
    return visible


def extend_attention_cpu(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, k_scale, v_scale,
                         req_to_token, req_pool_indices, seq_lens, extend_seq_lens, extend_start_loc,
                         max_len_extend, sm_scale, logit_cap, is_cross_attention, sliding_window, encoder_lens,
                         sinks, tree_mask, is_causal) -> None:
    """SGLang `extend_attention_cpu` (sgl-kernel/csrc/cpu/extend.cpp): request b's new tokens (rows
    extend_start_loc[b] : + extend_seq_lens[b] of q/k/v_extend) attend over its cached prefix
    (the first seq_lens[b] - extend_seq_lens[b] slots of its req_to_token row) and over the new
    tokens, in causal order or, for a speculative verify batch, as `tree_mask` allows."""
    _refuse_unsupported("extend_attention_cpu", k_buffer, k_scale, v_scale, is_cross_attention, sliding_window, sinks)
    if k_extend is None or v_extend is None:
        raise NotImplementedError("sgl_kernel.extend_attention_cpu in the CPU test-bed stand-in needs k/v_extend")
    for b, row in enumerate(req_pool_indices.tolist()):
        start, extend = int(extend_start_loc[b]), int(extend_seq_lens[b])
        prefix = int(seq_lens[b]) - extend
        slots = req_to_token[row, :prefix].long()
        new = slice(start, start + extend)
        keys = torch.cat([k_buffer[slots], k_extend[new].to(k_buffer.dtype)])
        values = torch.cat([v_buffer[slots], v_extend[new].to(v_buffer.dtype)])
        visible = _extend_visibility(prefix, extend, tree_mask, b, is_causal)
        o_extend[new] = _attend(q_extend[new], keys, values, visible, sm_scale, logit_cap).to(o_extend.dtype)


_LIBRARY.define(_DECODE_SCHEMA)
_LIBRARY.impl("decode_attention_cpu", decode_attention_cpu, "CPU")
_LIBRARY.define(_EXTEND_SCHEMA)
_LIBRARY.impl("extend_attention_cpu", extend_attention_cpu, "CPU")
