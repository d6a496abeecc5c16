"""Speculative-decoding kernels: none exist in the CPU stand-in (every name raises when called)."""

from sgl_kernel._missing import missing_op


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    return missing_op(name)
