"""The command-line convention of every petdaq program (docs/tools.md, "Command lines"), for
the Python ones: -h/--help, --version printing "NAME (petdaq) VERSION", and a usage error
that names the program and the offending argument and exits 2 — an unknown option is named
even when a required argument is missing too."""

import argparse
import re
import sys

from . import __version__


def version_line(prog):
    # A subcommand's parser ("petdaq-calibrate energy") prints the program's line.
    return f"{prog.split()[0]} (petdaq) {__version__}"


def _option_strings(parser):
    known = set()
    for action in parser._actions:
        known.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                known |= _option_strings(sub)
    return known


class ArgumentParser(argparse.ArgumentParser):
    """argparse with --version and strict option names (no abbreviations)."""

    def __init__(self, prog, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(prog=prog, **kwargs)
        self.add_argument("--version", action="version", version=version_line(prog))

    def parse_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        known = _option_strings(self)
        options = args[:args.index("--")] if "--" in args else args
        unknown = [a for a in options
                   if a.startswith("-") and a != "-" and not re.match(r"^-\d", a)
                   and a.split("=", 1)[0] not in known]
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_args(args, namespace)
