"""argparse's own errors as hwprof's: one line on standard error naming the command they are about, with a
suggestion where a close name exists (difflib) and the help to read, exit 2. argparse prints its usage (21 lines
for collect) before the error, reports an unknown option of a subcommand against the top-level `hwprof`, and
suggests nothing for `hwprof reprot` or `--modle`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from hwprof.cli.exit_codes import EXIT_USAGE
from hwprof.core.uservalue import close_to

CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
UNKNOWN = re.compile(r"unrecognized arguments: (.*)")


class OneLineParser(argparse.ArgumentParser):
    """The command line's parser: its usage errors are one line (see the module's docstring)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        command = self._command()
        where = command.prog
        unknown = UNKNOWN.match(message)
        if unknown is not None:  # left over by a subcommand's parser: said against that subcommand
            first = unknown.group(1).split()[0]
            message += close_to(first.split("=")[0], _options(command))
        elif (choice := CHOICE.search(message)) is not None:
            names = [n.strip().strip("'") for n in choice.group(2).split(",")]
            given, suggestion = choice.group(1), close_to(choice.group(1), names)
            argument = message.split(":", 1)[0]
            message = f"{argument}: invalid choice {given!r}{suggestion}, choose from {', '.join(names)}"
        message = message.replace("invalid <lambda> value", "invalid value")
        about = where.removeprefix("hwprof").strip()  # the subcommand, where the mistake is one of its own
        print(f"hwprof: error: {about + ': ' if about else ''}{message}; see `{where} --help`", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    def _command(self) -> argparse.ArgumentParser:
        """The subcommand's parser the words named (this parser where they name none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for word in getattr(self, "_words", []):
                    if word in action.choices:
                        return action.choices[word]
        return self


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
