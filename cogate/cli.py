"""``cogate`` command line: one console script, one subcommand per component.

Each component owns its flags (``main(argv) -> int`` with its own argparse); this
module only dispatches, importing the component lazily so ``cogate webhook`` does
not load the controller and vice versa.

``demo`` and ``dev`` run the local control plane, ``cogate.localcluster``, which only a source
checkout installs: the container image leaves it out (its real node and image build run apt-get,
iptables and buildah as root; the image runs as a non-root user), so there these commands say
so (:data:`NOT_INSTALLED`, exit 1) instead of failing on an import.

Exit codes: 0 success, 1 runtime failure, 2 usage error (``explain``: docs/explain.md).
The console script ``kubectl-cogate`` is this dispatcher too: ``kubectl cogate explain ...``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

from . import __version__

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "webhook": ("cogate.webhook.main", "run the mutating admission webhook (adds the scheduling gate)"),
    "controller": ("cogate.controller.main", "run the gang controller (plans and removes gates)"),
    "certs": ("cogate.certs.bootstrap", "generate webhook certificates or manage them in-cluster"),
    "explain": ("cogate.explain", "why a PodGroup waits: what fits where, the first shortfall, what would help"),
    "ungate": ("cogate.ungate", "remove cogate's gate from gated pods (or delete them): before helm uninstall"),
    "demo": ("cogate.localcluster.demo", "run the example on a local control plane and show the outcome"),
    "dev": ("cogate.localcluster.dev", "dev up|down|status|build: a local control plane left running"),
}


#: The package the local-cluster commands need, absent from the container image.
LOCAL_CLUSTER = "cogate.localcluster"
#: What ``cogate demo|dev`` print where :data:`LOCAL_CLUSTER` is not installed.
NOT_INSTALLED = ("cogate {name}: the local control plane is not installed in this image; run `cogate {name}` "
                 "from a source checkout (`make demo`, `make dev-up`; see README.md), or install cogate on a "
                 "cluster with the Helm chart (charts/cogate)")


def _installed(module: str) -> bool:
    """True unless ``module`` belongs to :data:`LOCAL_CLUSTER` and that package is not installed."""
    if module != LOCAL_CLUSTER and not module.startswith(LOCAL_CLUSTER + "."):
        return True
    return importlib.util.find_spec(LOCAL_CLUSTER) is not None


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: cogate <command> [options]   (cogate {__version__})", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" + ("" if _installed(module) else " (not installed here)")
              for name, (module, text) in COMMANDS.items()]
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
    if not _installed(COMMANDS[name][0]):
        print(NOT_INSTALLED.format(name=name), file=sys.stderr)
        return 1
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
