"""What each end-to-end module costs the servers, against its budget (tests/e2e/budget.toml).

Wall-clock time on a shared 2-core host says as much about the host as about the tests, so the
budget is kept in what the host does not change: the server launches a module makes beyond the
session's pooled servers (each a log file of its own in the tier's logs folder, whichever process
of the tier launched it; a unit tier beside it logs elsewhere) and the output tokens the pooled servers generated while the module ran (their own
Prometheus counters). A module over either figure, or one with no budget, fails the session; its
wall time is printed beside the figures, for information.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

BUDGET_FILE = Path(__file__).with_name("budget.toml")
POOL_LOG_PREFIX = "e2e-pool-"


@dataclass
class ModuleCost:
    launches: int = 0
    tokens: float = 0.0
    wall_s: float = 0.0


@dataclass
class Tally:
    logs_dir: Path
    costs: dict[str, ModuleCost] = field(default_factory=dict)
    _module: str | None = None
    _logs: set[str] = field(default_factory=set)
    _tokens: dict[str, float] = field(default_factory=dict)
    _started: float = 0.0

    def begin(self, module: str, tokens: dict[str, float]) -> None:
        self._module, self._tokens, self._started = module, tokens, time.monotonic()
        self._logs = self._own_logs()

    def end(self, tokens: dict[str, float]) -> None:
        cost = self.costs.setdefault(self._module, ModuleCost())
        cost.launches += len(self._own_logs() - self._logs)
        cost.tokens += sum(total - self._tokens.get(name, 0.0) for name, total in tokens.items())
        cost.wall_s += time.monotonic() - self._started
        self._module = None

    @property
    def open(self) -> bool:
        return self._module is not None

    def _own_logs(self) -> set[str]:
        if not self.logs_dir.is_dir():
            return set()
        return {p.name for p in self.logs_dir.glob("*.log") if not p.name.startswith(POOL_LOG_PREFIX)}


def over_budget(costs: dict[str, ModuleCost], budget: dict[str, dict[str, float]]) -> list[str]:
    """One line per module past its budget (or without one)."""
    lines = []
    for module, cost in sorted(costs.items()):
        limit = budget.get(module)
        if limit is None:
            lines.append(f"{module}: no budget in {BUDGET_FILE.name}")
            continue
        if cost.launches > limit["launches"]:
            lines.append(f"{module}: {cost.launches} server launches, budget {limit['launches']}")
        if cost.tokens > limit["tokens"]:
            lines.append(f"{module}: {cost.tokens:.0f} tokens generated, budget {limit['tokens']}")
    return lines


def load_budget() -> dict[str, dict[str, float]]:
    return tomllib.loads(BUDGET_FILE.read_text(encoding="utf-8"))


def cost_table(costs: dict[str, ModuleCost]) -> list[str]:
    rows = [f"{'module':<34} {'launches':>8} {'tokens':>8} {'wall s':>7}"]
    for module, cost in sorted(costs.items(), key=lambda kv: -kv[1].wall_s):
        rows.append(f"{module:<34} {cost.launches:>8} {cost.tokens:>8.0f} {cost.wall_s:>7.1f}")
    return rows
