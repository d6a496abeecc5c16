"""Pure-torch stand-in for `sgl_kernel` on CPU-only test machines (see ../README.md).

Provides the ops SGLang's CPU engine calls for plain decoding and for speculative decoding
(EAGLE, STANDALONE, NGRAM) with the intel_amx attention backend. Any other op raises
NotImplementedError naming itself when called.
"""

from __future__ import annotations

from sgl_kernel import attention  # noqa: F401  (registers torch.ops.sgl_kernel.*_attention_cpu)
from sgl_kernel._missing import missing_op
from sgl_kernel.cache_ops import (  # noqa: F401
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    build_draft_decode_metadata_cpu,
    copy_all_layer_kv_cache_cpu,
    fill_accept_out_cache_loc_cpu,
    fill_bonus_tokens_cpu,
)
from sgl_kernel.tree_ops import build_tree_kernel_efficient_cpu, verify_tree_greedy_cpu  # noqa: F401


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    return missing_op(name)
