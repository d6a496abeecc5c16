"""KV-cache bookkeeping ops: which cache slots a request's tokens live in.

Each function reproduces the SGLang kernel named in its docstring (the Triton version in
`sglang/kernels/ops/...`, whose CPU branch calls the op of the same name here). Python loops are
fine: these run on the test bed's tiny batches.
"""

from __future__ import annotations

import ctypes

import torch


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """SGLang `assign_req_to_token_pool` (mem_cache): for each request r in order, write its next
    (end - start) cache slots into req_to_token[r, start:end], consuming out_cache_loc front to back."""
    cursor = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        if not 0 <= start <= end <= pool_len:
            raise ValueError(f"cache range [{start}, {end}) outside the pool row of {pool_len}")
        req_to_token[row, start:end] = out_cache_loc[cursor:cursor + end - start].to(req_to_token.dtype)
        cursor += end - start


def assign_extend_cache_locs_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """SGLang `assign_extend_cache_locs` (kernels/ops/speculative/cache_locs.py), the reverse of the
    op above: out_cache_loc = concat over r of req_to_token[req_pool_indices[r], start[r]:end[r]]."""
    cursor = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        if not 0 <= start <= end <= pool_len:
            raise ValueError(f"cache range [{start}, {end}) outside the pool row of {pool_len}")
        out_cache_loc[cursor:cursor + end - start] = req_to_token[row, start:end].to(out_cache_loc.dtype)
        cursor += end - start


def assign_draft_cache_locs_contiguous_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                           seq_lens: torch.Tensor, out_cache_loc: torch.Tensor,
                                           pool_len: int, topk: int, num_steps: int) -> None:
    """SGLang `assign_draft_cache_locs_contiguous` (cache_locs.py): request b's topk * num_steps
    draft slots are the ones right after its committed tokens,
    out[b*topk*steps + j] = req_to_token[req_pool_indices[b], seq_lens[b] + j]."""
    width = topk * num_steps
    for b, (row, seq_len) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        if seq_len + width > pool_len:
            raise ValueError(f"draft slots [{seq_len}, {seq_len + width}) outside the pool row of {pool_len}")
        out_cache_loc[b * width:(b + 1) * width] = req_to_token[row, seq_len:seq_len + width].to(out_cache_loc.dtype)


def build_draft_decode_metadata_cpu(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor,
                                    seq_lens: torch.Tensor, topk: int, num_steps: int,
                                    pool_len: int) -> torch.Tensor:
    """The token table the intel_amx multi-step draft backend attends through (SGLang
    `IntelAMXMultiStepDraftBackend`; the GPU backends build the same indices with
    `generate_draft_decode_kv_indices`, page size 1). One row per (request b, branch k), row
    b*topk + k: the committed prefix req_to_token[rpi[b], :seq_len], then branch k's own draft
    slots req_to_token[rpi[b], seq_len + k*num_steps : seq_len + (k+1)*num_steps]."""
    rows = torch.zeros((len(seq_lens) * topk, pool_len), dtype=req_to_token.dtype)
    for b, (row, seq_len) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        for k in range(topk):
            out = rows[b * topk + k]
            out[:seq_len] = req_to_token[row, :seq_len]
            branch = seq_len + k * num_steps
            out[seq_len:seq_len + num_steps] = req_to_token[row, branch:branch + num_steps]
    return rows


def fill_accept_out_cache_loc_cpu(accept_index: torch.Tensor, out_cache_loc: torch.Tensor,
                                  accept_out_cache_loc: torch.Tensor) -> None:
    """SGLang `fill_accept_out_cache_loc` (kernels/ops/speculative/eagle.py): the cache slots of the
    accepted tokens, compacted: out[k] = out_cache_loc[p] for the k-th entry p of accept_index
    (flattened, in order) that is not -1."""
    accepted = accept_index.reshape(-1)
    accepted = accepted[accepted != -1]
    accept_out_cache_loc[:len(accepted)] = out_cache_loc[accepted].to(accept_out_cache_loc.dtype)


def fill_bonus_tokens_cpu(accept_tokens: torch.Tensor, accept_lens: torch.Tensor, bonus_tokens: torch.Tensor,
                          accept_stride: int) -> None:
    """SGLang `fill_bonus_tokens` (eagle.py): each request's last accepted token (the bonus token,
    counted in accept_lens), bonus[i] = accept_tokens.flat[accept_stride * i + accept_lens[i] - 1]."""
    flat = accept_tokens.reshape(-1)
    for i, length in enumerate(accept_lens.tolist()):
        bonus_tokens[i] = flat[accept_stride * i + length - 1]


def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor,
                                src_loc: torch.Tensor) -> None:
    """SGLang `copy_all_layer_kv_cache_tiled` (kernels/ops/kvcache/cache_move.py): in every layer
    buffer (given as a raw address and a row stride in bytes), rows[tgt] = rows[src], all source
    rows read before any is written, so overlapping moves are safe."""
    if len(tgt_loc) != len(src_loc):
        raise ValueError(f"{len(tgt_loc)} target rows for {len(src_loc)} source rows")
    if len(tgt_loc) == 0:
        return
    rows_needed = int(max(tgt_loc.max(), src_loc.max())) + 1
    for address, stride in zip(data_ptrs.tolist(), strides.tolist()):
        raw = (ctypes.c_uint8 * (rows_needed * stride)).from_address(address)
        rows = torch.frombuffer(raw, dtype=torch.uint8).view(rows_needed, stride)
        rows[tgt_loc.long()] = rows[src_loc.long()].clone()
