"""Test-bed server start-up hook: tell SGLang that this CPU can run its intel_amx attention backend.

SGLang replaces `--attention-backend intel_amx` by torch_native when its platform fact `has_amx`
is false, and `has_amx` needs both AMX tiles and the compiled `convert_weight_packed` kernel, which
this stand-in deliberately lacks (that op would move every linear layer onto AMX kernels). The
stand-in does provide the two attention ops that backend uses, and speculative decoding needs
that backend, so as soon as `sglang.srt.runtime_context` is imported this hook overrides exactly
that one fact with SGLang's own `override_platform`. The checks that choose the AMX matmul, norm
and rope kernels read `cpu_has_amx_support()` directly and stay false.

Python imports `sitecustomize` from its path at start-up; the launcher puts this folder on the
server's PYTHONPATH only for test-bed profiles (`cpu_kernel_standin: true`).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

TARGET = "sglang.srt.runtime_context"


class _OverrideAfterLoad(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        module.override_platform(has_amx=True).install()


class _RuntimeContextFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _OverrideAfterLoad(spec.loader)
        return spec


sys.meta_path.insert(0, _RuntimeContextFinder())
