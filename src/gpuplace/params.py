"""A step's parameter table: one row per parameter (name, type, unit, default, help), the only place its
default is written.

A step (:mod:`gpuplace.steps`) declares its table; the CLI command makes its flags from it
(:func:`add_flags`), the step reads a mapping of those names with it (:func:`parse`: a missing or ``None``
value takes the table's default, ``0`` and ``""`` keep their meaning of "unset" that KFP parameters need),
and a test checks each component's signature against it (:func:`signature_disagreements`), so the CLI,
the component and the library cannot drift apart. A step reads its values typed
(:func:`parse_as`, into a class of one field per row that :func:`values_disagreements` holds to the
table). A row whose default is :data:`REQUIRED` has none: a
required flag, a component parameter without a default; a ``list`` row is a repeatable flag (strings).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gpuplace.errors import InvalidInput

V = TypeVar("V")
REQUIRED: Any = inspect.Parameter.empty  # the default of a row that has none (what a signature spells)


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter: its name (the component's, and the CLI flag with ``-``), type, default, help."""

    name: str
    kind: type
    default: Any
    help: str
    flag: str = ""  # the CLI flag when it is not --<name with dashes>
    choices: tuple[str, ...] = ()
    unit: str = ""  # "s", "ms", "req/s", ... (also in the name, when it has one: timeout_s)
    cli: bool = True  # a flag of the CLI command
    component: bool = True  # a parameter of the component
    metavar: str = ""  # how the flag's value is shown in --help, when not its name

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    table: Sequence[Param],
    *,
    helps: Mapping[str, str] | None = None,
) -> None:
    """The table's CLI flags (``bool``: a switch, off by default); ``helps`` replaces a row's help."""
    for p in table:
        if not p.cli:
            continue
        text = (helps or {}).get(p.name, p.help)
        if p.kind is bool:
            parser.add_argument(p.cli_flag, dest=p.name, action="store_true", default=p.default, help=text)
        elif p.kind is list:  # repeatable; argparse copies the default before appending
            parser.add_argument(
                p.cli_flag,
                dest=p.name,
                action="append",
                type=str,
                default=p.default,
                help=text,
                metavar=p.metavar or None,
            )
        else:
            parser.add_argument(
                p.cli_flag,
                dest=p.name,
                type=p.kind,
                required=p.required,
                default=None if p.required else p.default,
                choices=p.choices or None,
                help=text,
                metavar=p.metavar or None,
            )


def parse(table: Sequence[Param], values: Mapping[str, Any]) -> dict[str, Any]:
    """The table's values by name from ``values`` (other keys ignored), typed; missing or ``None`` take
    the default, and a required one is refused by its name."""
    out = {}
    for p in table:
        value = values.get(p.name)
        if value is None and p.required:
            raise InvalidInput(p.name, None, "is required", f"Give {p.cli_flag}" if p.cli else "")
        out[p.name] = p.default if value is None else p.kind(value)
    return out


def parse_as(cls: type[V], table: Sequence[Param], values: Mapping[str, Any]) -> V:
    """:func:`parse`'s values as a ``cls``: a dataclass with one typed field per row, so a step reads
    ``p.timeout_s`` (a float to mypy), not ``p["timeout_s"]``. The class writes the rows' names and
    types, never their defaults; :func:`values_disagreements` holds it to the table."""
    return cls(**parse(table, values))


def values_disagreements(cls: type, table: Sequence[Param]) -> list[str]:
    """Where a step's values class (:func:`parse_as`) differs from its table: a name on one side only,
    another type (a ``list`` row is ``list[str]``, a row whose default is ``None`` is ``<type> | None``),
    a default (the table's alone)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    rows = {p.name: p for p in table}
    out = [f"{n}: a field of {cls.__name__}, not a row of the table" for n in fields if n not in rows]
    out += [f"{n}: a row of the table, not a field of {cls.__name__}" for n in rows if n not in fields]
    for name in [n for n in rows if n in fields]:
        p, hint = rows[name], hints[name]
        args = typing.get_args(hint)
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
        if optional:
            (hint,) = [a for a in args if a is not type(None)]
        if (typing.get_origin(hint) or hint) is not p.kind or optional != (p.default is None):
            shown = f"{p.kind.__name__}{' | None' if p.default is None else ''}"
            out.append(f"{name}: type {hints[name]} in {cls.__name__}, {shown} in the table")
        if (
            fields[name].default is not dataclasses.MISSING
            or fields[name].default_factory is not dataclasses.MISSING
        ):
            out.append(f"{name}: a default in {cls.__name__}; the table's is the only one")
    return out


def defaults(table: Sequence[Param]) -> dict[str, Any]:
    """The rows' defaults by name (the required rows have none)."""
    return {p.name: p.default for p in table if not p.required}


def signature_disagreements(
    func: Callable[..., Any], table: Sequence[Param], *, artifacts: Collection[str] = ()
) -> list[str]:
    """Where a component function's parameters (its ``artifacts`` left out) differ from the table's
    component rows: a name on one side only, another default, another type."""
    sig = {n: q for n, q in inspect.signature(func).parameters.items() if n not in artifacts}
    rows = {p.name: p for p in table if p.component}
    out = [f"{n}: a parameter of the component, not in the table" for n in sorted(set(sig) - set(rows))]
    out += [f"{n}: in the table, not a parameter of the component" for n in sorted(set(rows) - set(sig))]
    for name in sorted(set(sig) & set(rows)):
        q, p = sig[name], rows[name]
        if q.default != p.default:
            out.append(
                f"{name}: default {_shown(q.default)} in the component, {_shown(p.default)} in the table"
            )
        annotation = q.annotation if isinstance(q.annotation, str) else getattr(q.annotation, "__name__", "")
        if annotation != p.kind.__name__:
            out.append(f"{name}: type {annotation} in the component, {p.kind.__name__} in the table")
    return out


def flag_disagreements(parser: argparse.ArgumentParser, table: Sequence[Param]) -> list[str]:
    """Where a CLI command's flags differ from the table's CLI rows: missing, another default, another
    type or choices."""
    actions = {a.dest: a for a in parser._actions}
    out = []
    for p in table:
        a = actions.get(p.name)
        if not p.cli:
            if a is not None and p.cli_flag in a.option_strings:
                out.append(f"{p.name}: a CLI flag, but not a CLI row of the table")
            continue
        if a is None or p.cli_flag not in a.option_strings:
            out.append(f"{p.name}: no flag {p.cli_flag}")
            continue
        if p.required != a.required:
            out.append(f"{p.name}: required {a.required} on the command line, {p.required} in the table")
        elif not p.required and a.default != p.default:
            out.append(f"{p.name}: default {a.default!r} on the command line, {p.default!r} in the table")
        if p.kind is not bool and a.type is not (str if p.kind is list else p.kind):
            out.append(f"{p.name}: type {a.type} on the command line, {p.kind.__name__} in the table")
        if tuple(a.choices or ()) != p.choices:
            out.append(f"{p.name}: choices {a.choices} on the command line, {p.choices} in the table")
    return out


def _shown(default: Any) -> str:
    return "none (required)" if default is REQUIRED else repr(default)
