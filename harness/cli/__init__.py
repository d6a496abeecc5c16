"""The `sparkbench` command line: thin typed wrappers over the stage modules.

Each module registers its commands on `app` (`harness.cli.app`); options come from the typed models
through `harness.cli.binding`, so an option is declared once, in its model.
"""

from harness.cli import agree, capacity, gap, imports, jobs, results, run  # noqa: F401  (each registers its commands)
from harness.cli.app import app, main

__all__ = ["app", "main"]
