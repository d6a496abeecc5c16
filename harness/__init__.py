"""sparkbench: decode-speed and accuracy benchmarks for LLM inference servers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sparkbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
