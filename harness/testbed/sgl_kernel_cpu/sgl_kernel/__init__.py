"""Pure-torch stand-in for `sgl_kernel` on CPU-only test machines (see ../README.md).

Only `assign_req_to_token_pool_cpu` is implemented; any other op raises NotImplementedError
naming itself when called.
"""

from __future__ import annotations

import torch

from sgl_kernel._missing import missing_op


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """For each request r in order, write its next (end - start) cache slots into
    req_to_token[r, start:end], consuming out_cache_loc front to back."""
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    cursor = 0
    for row, start, end in zip(req_pool_indices.tolist(), starts, ends):
        length = end - start
        if not 0 <= start <= end <= pool_len:
            raise ValueError(f"cache range [{start}, {end}) outside the pool row of {pool_len}")
        req_to_token[row, start:end] = out_cache_loc[cursor:cursor + length].to(req_to_token.dtype)
        cursor += length


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    return missing_op(name)
