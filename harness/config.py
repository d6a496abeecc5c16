"""Typed configuration: strict pydantic models, and bad input as one line per error.

Every configuration the harness reads (workload options, run options, the nightly config) is a
`StrictModel`: unknown keys are refused, values are not coerced between types (a YAML `"8"` is not
the number 8), and `validated` turns every problem into one line `where: field: what is wrong`,
raised as a SparkbenchError (exit 2) before anything runs. The resolved model is what the run
manifest records.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import annotated_types
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from harness.errors import SparkbenchError

# A path written as text in YAML or on the command line: the one type strict mode lets be coerced.
PathText = Annotated[Path, Field(strict=False)]
# A folder stored absolute: a resumed run may be started from another folder.
AbsolutePathText = Annotated[PathText, AfterValidator(lambda folder: folder.expanduser().resolve())]

Model = TypeVar("Model", bound=BaseModel)


class StrictModel(BaseModel):
    """No unknown keys, no type coercion, frozen once validated."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @classmethod
    def part_of(cls: type[Model], source: BaseModel, /, **changes: Any) -> Model:
        """This model's fields taken from `source` (a config that includes them), with `changes`."""
        return cls(**{name: getattr(source, name) for name in cls.model_fields} | changes)


def error_lines(error: ValidationError, where: str) -> list[str]:
    """One line per problem; unknown keys at the same place are named together."""
    lines, unknown = [], {}
    for problem in error.errors():
        path = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "extra_forbidden":
            parent, _, key = path.rpartition(".")
            unknown.setdefault(parent, []).append(key)
            continue
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {path}: {message}" if path else f"{where}: {message}")
    for parent, keys in unknown.items():
        lines.append(f"{where}{': ' + parent if parent else ''}: unknown keys {', '.join(keys)}")
    return lines


def validated(model: type[Model], data: Any, where: str) -> Model:
    """`model` validated from `data` (a mapping); a SparkbenchError with one line per problem."""
    if not isinstance(data, Mapping):
        raise SparkbenchError(f"{where}: expected a mapping, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise SparkbenchError("\n".join(error_lines(exc, where))) from None


def bounds(model: type[BaseModel], field: str) -> dict[str, float]:
    """A field's `ge` / `le` constraints as typer's `min` / `max`, so the command line checks what the
    model checks, with the same numbers."""
    found: dict[str, float] = {}
    for rule in model.model_fields[field].metadata:
        if isinstance(rule, annotated_types.Ge):
            found["min"] = rule.ge
        elif isinstance(rule, annotated_types.Le):
            found["max"] = rule.le
    return found


def load_yaml_config(model: type[Model], path: Path, what: str, overrides: Mapping[str, Any] = {}) -> Model:
    """`model` validated from the YAML file at `path` (`what` names it in errors), with the
    `overrides` that are not None laid over the file's top-level keys."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except FileNotFoundError as exc:
        raise SparkbenchError(f"{what} {path} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise SparkbenchError(f"{what} {path} is not valid YAML: {' '.join(str(exc).split())}") from exc
    if isinstance(data, dict):
        data.update({key: value for key, value in overrides.items() if value is not None})
    return validated(model, data, f"{what} {path}")
