"""``cogate`` command line: one console script, one subcommand per component.

Each component owns its flags (``main(argv) -> int`` with its own argparse); this
module only dispatches, importing the component lazily so ``cogate webhook`` does
not load the controller and vice versa.

Exit codes: 0 success, 1 runtime failure, 2 usage error.
"""

from __future__ import annotations

import importlib
import sys

from . import __version__

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "webhook": ("cogate.webhook.main", "run the mutating admission webhook (adds the scheduling gate)"),
    "controller": ("cogate.controller.main", "run the gang controller (plans and removes gates)"),
    "certs": ("cogate.certs.bootstrap", "generate webhook certificates or manage them in-cluster"),
    "demo": ("cogate.localcluster.demo", "run the example on a local control plane and show the outcome"),
    "dev": ("cogate.localcluster.dev", "dev up|down|status|build: a local control plane left running"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: cogate <command> [options]   (cogate {__version__})", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "`cogate <command> --help` shows a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"cogate {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"cogate: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
