"""`sgl_kernel.speculative`: NGRAM's tree reconstruction; any other name raises when called."""

from sgl_kernel._missing import missing_op
from sgl_kernel.tree_ops import reconstruct_indices_from_tree_mask  # noqa: F401


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    return missing_op(name)
