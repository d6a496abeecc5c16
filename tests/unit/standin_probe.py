"""Runs sgl_kernel stand-in ops on given inputs, for tests/unit/test_sgl_kernel_standin.py.

Executed by a Python that has torch (a server environment's), with the stand-in folder on
PYTHONPATH; the harness itself never imports torch. Reads a JSON list of cases on stdin and writes
one JSON object: case name -> {"args": [the listed arguments after the call], "buffers": [the
case's buffers after the call], "result": the return value} or {"error": "ExceptionType: message"}.

An argument is a JSON scalar or null, {"tensor": nested list, "dtype": name}, or {"data_ptrs": [i,
...]} / {"row_strides": [i, ...]}: the raw addresses / row strides in bytes of the case's buffers
(tensors given as `buffers`), as SGLang's KV pool hands them to its copy kernel.
"""

from __future__ import annotations

import importlib
import json
import sys

import torch


def _value(spec, buffers: list):
    if not isinstance(spec, dict):
        return spec
    if "tensor" in spec:
        return torch.tensor(spec["tensor"], dtype=getattr(torch, spec["dtype"]))
    if "data_ptrs" in spec:
        return torch.tensor([buffers[i].data_ptr() for i in spec["data_ptrs"]], dtype=torch.uint64)
    return torch.tensor([buffers[i].stride(0) * buffers[i].element_size() for i in spec["row_strides"]])


def _op(path: str):
    """`module.name` of the stand-in, or `torch.ops.sgl_kernel.name` for a registered op."""
    if path.startswith("torch.ops."):
        importlib.import_module("sgl_kernel")  # registers the torch ops
        return getattr(torch.ops.sgl_kernel, path.rsplit(".", 1)[1])
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _plain(value):
    return value.tolist() if isinstance(value, torch.Tensor) else value


def run(case: dict) -> dict:
    buffers = [_value(spec, []) for spec in case.get("buffers", [])]
    args = [_value(spec, buffers) for spec in case["args"]]
    try:
        result = _op(case["op"])(*args)
    except Exception as exc:  # the test asserts on the message
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"args": [_plain(args[i]) for i in case.get("outputs", [])], "buffers": [_plain(b) for b in buffers],
            "result": _plain(result)}


if __name__ == "__main__":
    cases = json.load(sys.stdin)
    json.dump({case["name"]: run(case) for case in cases}, sys.stdout)
