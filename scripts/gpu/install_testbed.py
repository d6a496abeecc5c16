"""Install a llama-server built elsewhere as the test bed's, so the end-to-end tests run against it.

    python install_testbed.py LLAMA_SERVER LLAMA_CPP_SOURCE

Used where `make llamacpp` cannot run (a GPU machine without the SGLang environment): the binary
and its source take the places the test bed looks in (under SPARKBENCH_CACHE), and the tiny model
and its GGUF folder are built with this Python, which must have torch and transformers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.testbed import llamacpp
from harness.testbed.envs import MARKER, TESTBED_DIR, model_corpus, model_dir


def main(binary: str, source: str) -> None:
    folder = llamacpp.build_dir()
    llamacpp.server_binary().parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, llamacpp.server_binary())
    if not llamacpp.source_dir().exists():
        llamacpp.source_dir().symlink_to(Path(source).resolve())
    (folder / MARKER).write_text("installed\n")
    tiny = model_dir()
    if not (tiny / MARKER).exists():
        subprocess.run([sys.executable, str(TESTBED_DIR / "build_tiny_model.py"), str(model_corpus()), str(tiny)],
                       check=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        (tiny / MARKER).write_text("ok\n")
    print(llamacpp.ensure_gguf_model(python=Path(sys.executable)))


if __name__ == "__main__":
    main(*sys.argv[1:])
