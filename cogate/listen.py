"""Where cogate's servers listen (webhook, its probes and metrics, the controller's metrics and
health): one rule for every listening socket (issue 30 item 6).

The default host :data:`ANY` ("") means every address of both IP families: one IPv6 socket on
``::`` with ``IPV6_V6ONLY`` off, which also accepts IPv4 clients as IPv4-mapped addresses
(``socket.create_server(..., dualstack_ipv6=True)``; RFC 3493 section 5.3), so a pod answers on
an IPv4-only, an IPv6-only and a dual-stack cluster alike. Where the host has no IPv6 (the kernel
built or booted without it, ``ipv6.disable=1``: ``socket.has_dualstack_ipv6()`` is False, or
binding ``::`` fails with ``EAFNOSUPPORT``/``EADDRNOTAVAIL``) it falls back to ``0.0.0.0``.
An explicit host binds that address only (``0.0.0.0``: IPv4 only; ``::``: both families, as
the default; ``127.0.0.1``, ``::1``: loopback).
"""

from __future__ import annotations

import errno
import socket

__all__ = ["ANY", "host_help", "listening_socket"]

#: Every address, both families (module doc).
ANY = ""


def host_help(what: str) -> str:
    """The ``--host``/``--metrics-host`` help text of the server ``what``, one wording for all."""
    return (f"address of {what}; 0.0.0.0: IPv4 only; '' or '::': every address of both IP families "
            "(IPv4 through IPv4-mapped IPv6 addresses; IPv4 only where the host has no IPv6) "
            "(default: every address of both IP families)")


#: Errors binding ``::`` that mean "no IPv6 here" (then :data:`ANY` falls back to IPv4).
_NO_IPV6 = (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT)


def listening_socket(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (``port`` 0: a free one; read
    ``getsockname()[1]``), ``SO_REUSEADDR`` set as servers do. ``host`` :data:`ANY` or ``::``:
    both families where the host has IPv6, else ``0.0.0.0`` (module doc). Raises ``OSError``
    (e.g. ``EADDRINUSE``) when the address cannot be bound, ``socket.gaierror`` for a host name
    that does not resolve."""
    if host in (ANY, "::"):
        if socket.has_dualstack_ipv6():
            try:
                return socket.create_server(("::", port), family=socket.AF_INET6, backlog=backlog,
                                            dualstack_ipv6=True)
            except OSError as exc:
                if exc.errno not in _NO_IPV6:
                    raise
        return socket.create_server(("0.0.0.0", port), family=socket.AF_INET, backlog=backlog)
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)[0]
    return socket.create_server(address, family=family, backlog=backlog)
