"""The command-line reference, read from the parser the `hwprof` command itself uses (build_parser) and the
exit-status table it prints (EXIT_CODES): every subcommand, its description, its option groups and each option's
help and default. Nothing here names an option, so a new or renamed one shows up in the next build."""

from __future__ import annotations

import argparse
import contextlib

from mdtext import cell, prose, slug, table

from hwprof.cli.help_text import COLLECTORS


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order the parser lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _help(action: argparse.Action, prog: str) -> str:
    """The option's help with argparse's %(default)s-style fields filled in, as `--help` prints it."""
    # the registry is not importable from the checkout the site builds from (collectors/ installs as
    # hwprof.collectors): the page names where the list is instead
    text = (action.help or "").replace(COLLECTORS, "the collectors `hwprof doctor` lists")
    if "%" in text:
        with contextlib.suppress(KeyError, TypeError, ValueError):  # a literal % in words, as --help keeps it
            text = text % {**vars(action), "prog": prog}
    return text


def _names(action: argparse.Action) -> str:
    """How the option is written: `--imgsz N` / `-h, --help` / a positional `RUN_DIR`."""
    if not action.option_strings:
        meta = action.metavar or action.dest
        shown = meta if isinstance(meta, str) else " ".join(meta)
        return f"`{shown.upper() if meta == action.dest else shown}`" + (" ..." if action.nargs in ("*", "+") else "")
    if action.nargs == 0:
        return ", ".join(f"`{o}`" for o in action.option_strings)
    meta = action.metavar or ("{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper())
    meta = meta if isinstance(meta, str) else " ".join(meta)
    return ", ".join(f"`{o} {meta}`" for o in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):
        return ""
    return f"`{action.default}`"


def _group_table(group: argparse._ArgumentGroup, prog: str) -> str:
    rows = []
    for action in group._group_actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            continue  # listed as commands of their own
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices and action.option_strings else ""
        rows.append((_names(action), cell(_help(action, prog)), choices, _default(action)))
    return table(("option", "what it does", "choices", "default"), rows) if rows else ""


def command_markdown(name: str, summary: str, parser: argparse.ArgumentParser, level: int = 2) -> str:
    """One command's section: its usage line, description and a table per option group."""
    hashes = "#" * level
    parts = [f"{hashes} `{parser.prog}`\n", f"{cell(summary)}\n" if summary else ""]
    if parser.description and parser.description != summary:
        parts.append(prose(parser.description))
    usage = parser.format_usage().removeprefix("usage: ").strip()
    parts.append(f"```text\n{usage}\n```\n")
    for group in parser._action_groups:
        body = _group_table(group, parser.prog)
        if body:
            title = group.title or "options"
            parts.append(f"**{cell(title)}**" + (f": {cell(group.description)}" if group.description else "") + "\n")
            parts.append(body)
    for sub_name, sub_summary, sub in _subcommands(parser):
        parts.append(command_markdown(sub_name, sub_summary, sub, level + 1))
    return "\n".join(p for p in parts if p)


def cli_markdown() -> str:
    """The whole page: the commands' index, each command, and the exit statuses."""
    from hwprof.cli.args import build_parser
    from hwprof.cli.exit_codes import EXIT_CODES

    parser = build_parser()
    commands = _subcommands(parser)
    parts = [
        "# Command-line reference\n",
        "Generated from `hwprof.cli.args.build_parser()` (the parser `hwprof` itself runs) and "
        "`hwprof.cli.exit_codes.EXIT_CODES` when this site is built: it cannot drift from `hwprof --help`. "
        "A default computed from the machine (the thread count) is the one of the machine that built the site. "
        "`python -m hwprof ...` is the same command.\n",
    ]
    if parser.description:
        parts.append(prose(parser.description))
    index = [(f"[`{name}`](#{slug('hwprof ' + name)})", cell(summary)) for name, summary, _ in commands]
    parts.append(table(("command", "what it does"), index))
    parts += [command_markdown(name, summary, sub) for name, summary, sub in commands]
    parts.append("## Exit status\n")
    parts.append("Every command ends with one of these (`hwprof.cli.exit_codes`):\n")
    parts.append(table(("status", "meaning"), [(f"`{e.code}`", cell(e.meaning)) for e in EXIT_CODES]))
    return "\n".join(parts)
