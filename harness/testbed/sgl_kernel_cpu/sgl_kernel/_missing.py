"""Placeholders for kernels the CPU stand-in does not provide: importable, loud when called."""


def missing_op(name: str):
    def op(*args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not provided by the CPU test-bed stand-in for sgl_kernel")

    op.__name__ = name
    return op
