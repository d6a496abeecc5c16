"""The embedded default server: a local SGLang on CPU serving the test bed's tiny model.

Used when no `--server` is given, and by the end-to-end tests. Its numbers describe a 2-layer
random model on a CPU, so everything it produces is labelled as the reduced-scale test bed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.server import ManagedServer, free_port
from harness.testbed.envs import TESTBED_DIR, cache_root, ensure_model, env_python

STANDIN_DIR = TESTBED_DIR / "sgl_kernel_cpu"
DEFAULT_PROFILE = "cpu-testbed"
SCALE_LABEL = "REDUCED SCALE: embedded CPU test bed (tiny random model on SGLang CPU), not the published shape"


@dataclass(frozen=True)
class EmbeddedServer:
    base_url: str
    profile: str
    model_dir: Path
    log_path: Path


@contextmanager
def embedded_server(profile_name: str = DEFAULT_PROFILE, log_name: str = "server") -> Iterator[EmbeddedServer]:
    """Start the test-bed server from a profile, yield its facts, and always stop it."""
    from harness.profiles import launch_spec, load_profile  # attaching to a server needs no profiles

    profile = load_profile(profile_name)
    model = ensure_model()
    port = free_port()
    spec = launch_spec(profile, model_dir=model, port=port, env_python=env_python(profile.engine),
                       standin_dir=STANDIN_DIR)
    base_url = f"http://127.0.0.1:{port}"
    log_path = cache_root() / "logs" / f"{log_name}-{port}.log"
    with ManagedServer(spec, base_url, log_path):
        yield EmbeddedServer(base_url=base_url, profile=profile.name, model_dir=model, log_path=log_path)
