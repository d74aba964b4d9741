"""The shape of one ``gpuplace`` subcommand: a name, help written for users, its flags, and a call.

Each module of :mod:`gpuplace.cli` defines one :class:`Command` subclass, as vLLM's ``entrypoints/cli``
does; :mod:`gpuplace.cli.main` imports them in the order of the flow. A command imports the library it
calls inside :meth:`Command.run`, so ``gpuplace --help`` is instant and ``gpuplace profile`` works where
kfp and mlflow are not installed.
"""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default when it says something (not for required, empty or off options), and
    keeps the descriptions' own line breaks; the help is wide enough for the examples."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=110)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        quiet = default in (None, "", [], False, argparse.SUPPRESS) or action.required
        if quiet or "%(default)" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Command:
    name: str = ""
    help: str = ""  # one line in `gpuplace --help`
    description: str = ""  # the top of `gpuplace <name> --help`, for users
    epilog: str = ""  # examples, shown at the bottom of the help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's flags."""

    def run(self, args: argparse.Namespace) -> int:
        """Call into the library; return the exit status."""
        raise NotImplementedError

    def register(self, sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        parser = sub.add_parser(
            self.name,
            help=self.help,
            description=self.description or self.help,
            epilog=self.epilog or None,
            formatter_class=HelpFormatter,
        )
        self.add_arguments(parser)
        parser.set_defaults(command_object=self)


def comma_floats(text: str, field: str) -> list[float]:
    """``"1,2,4"`` → ``[1.0, 2.0, 4.0]``, or :class:`~gpuplace.errors.InvalidInput` naming ``field``."""
    from gpuplace.errors import InvalidInput

    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidInput(field, text, "is not a comma list of numbers", "e.g. 1,2,4") from None


def comma_ints(text: str, field: str) -> list[int]:
    from gpuplace.errors import InvalidInput

    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidInput(field, text, "is not a comma list of integers", "e.g. 1,2,4") from None
