"""Command-line options derived from the typed models, so each option is declared once.

`bind(**groups)` turns the fields of pydantic models into a typer command's options: the flag is
`--` + the field name with `-` for `_` and a trailing `_s` (seconds, said in the help) dropped,
unless the field names its own in `json_schema_extra={"flag": ...}`; the help is the field's
description (a workload config adds its scale defaults, `WorkloadConfig.help`); `ge` / `le` become
typer's bounds; a boolean gets `--x/--no-x`; a list field's option is repeated, once per item. The command receives one dict per group.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from harness.config import bounds

CLI_TYPES = (bool, int, float, str, Path)


@dataclass(frozen=True)
class Group:
    """The options a model gives a command; `skip` names fields it does not offer; with `overrides`
    every option defaults to None (given ones override a config file)."""

    model: type[BaseModel]
    skip: frozenset[str] = frozenset()
    overrides: bool = False


def flag(name: str, field: FieldInfo) -> str:
    """The field's flag (the rule in the module docstring)."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return str(extra.get("flag") or "--" + name.removesuffix("_s").replace("_", "-"))


def _cli_type(annotation: Any) -> type:
    """The one type typer parses a field as: its annotation without None; text for secrets and choices."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if args and typing.get_origin(annotation) is not Literal:
        return _cli_type(args[0])
    return annotation if annotation in CLI_TYPES else str


def option(model: type[BaseModel], name: str) -> typer.models.OptionInfo:
    """The typer option of one field: flag, help and bounds (the help of a workload config names
    its published and reduced-scale defaults)."""
    field = model.model_fields[name]
    help_text = model.help(name) if hasattr(model, "help") else field.description or name
    kind = _cli_type(field.annotation)
    flags = [flag(name, field)]
    if kind is bool:
        flags = [f"{flags[0]}/--no-{flags[0].removeprefix('--')}"]
    return typer.Option(*flags, help=help_text, **bounds(model, name))


def _repeatable(annotation: Any) -> bool:
    """A list field: its option may be given several times (`--header A:1 --header B:2`)."""
    return typing.get_origin(annotation) is list


def _parameter(model: type[BaseModel], name: str, overrides: bool) -> inspect.Parameter:
    field = model.model_fields[name]
    if _repeatable(field.annotation):  # not given: None, so the model's default (or a config file's) holds
        annotation = Annotated[Optional[list[_cli_type(field.annotation)]], option(model, name)]
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None)
    default = field.get_default(call_default_factory=True)
    scaled = name in getattr(model, "published", {})  # None: the default of the target's scale
    kind = _cli_type(field.annotation)
    optional = overrides or default is None or scaled
    annotation = Annotated[Optional[kind] if optional else kind, option(model, name)]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=None if optional else default)


def bind(**groups: Group) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the command takes one option per field of each group's model, and is called with
    one dict per group (`name=Group(Model)` -> `name={field: value}`); its other parameters stay
    typer parameters of their own."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        parameters = [p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY)
                      for p in inspect.signature(command).parameters.values() if p.name not in groups]
        owner: dict[str, str] = {p.name: "" for p in parameters}
        for group_name, group in groups.items():
            for name in group.model.model_fields:
                if name in group.skip:
                    continue
                if name in owner:
                    raise TypeError(f"option {name} is declared by both {owner[name]} and {group_name}")
                owner[name] = group_name
                parameters.append(_parameter(group.model, name, group.overrides))

        @functools.wraps(command)
        def bound(**values: Any) -> Any:
            parts: dict[str, Any] = {group_name: {} for group_name in groups}
            for name, value in values.items():
                if owner[name]:
                    parts[owner[name]][name] = value
                else:
                    parts[name] = value
            return command(**parts)

        bound.__signature__ = inspect.Signature(parameters)
        bound.__annotations__ = {p.name: p.annotation for p in parameters}
        return bound

    return decorate


def given(values: dict[str, Any]) -> dict[str, Any]:
    """The options that were given (None: left to the model's default)."""
    return {key: value for key, value in values.items() if value is not None}
