"""Where the servers listen (cogate/listen.py; issue 30 item 6): by default every address of both IP
families, IPv4 only on a host without IPv6, and an explicit address only that one. Checked with
real sockets and real clients: the webhook's HTTPS and metrics ports, the controller's metrics
server."""

from __future__ import annotations

import errno
import socket
import urllib.request
from unittest import mock

import aiohttp
import pytest

from cogate import listen
from cogate.controller.kube.metrics import Metrics, serve
from cogate.webhook.server import WebhookServer, make_app

IPV6 = socket.has_dualstack_ipv6()
#: Client addresses the default must answer on (this host's families; the fallback is tested below).
CLIENTS = ("127.0.0.1", "[::1]") if IPV6 else ("127.0.0.1",)


def _connects(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as c:
        c.settimeout(2)
        try:
            c.connect((host, port))
        except OSError:
            return False
        return True


def test_the_default_takes_ipv4_and_ipv6_clients_on_one_socket():
    with listen.listening_socket(listen.ANY, 0) as s:
        port = s.getsockname()[1]
        assert all(_connects(h.strip("[]"), port) for h in CLIENTS)
        if IPV6:
            assert s.family == socket.AF_INET6
            assert s.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0


def test_an_explicit_ipv4_address_is_ipv4_only():
    with listen.listening_socket("0.0.0.0", 0) as s:
        assert s.family == socket.AF_INET
        port = s.getsockname()[1]
        assert _connects("127.0.0.1", port)
        if IPV6:
            assert not _connects("::1", port)


def test_without_ipv6_the_default_falls_back_to_ipv4():
    with mock.patch.object(socket, "has_dualstack_ipv6", return_value=False):
        with listen.listening_socket(listen.ANY, 0) as s:
            assert s.family == socket.AF_INET and s.getsockname()[0] == "0.0.0.0"
            assert _connects("127.0.0.1", s.getsockname()[1])
    real = socket.create_server

    def no_inet6(address, *, family=socket.AF_INET, **kw):
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(address, family=family, **kw)

    with mock.patch.object(socket, "has_dualstack_ipv6", return_value=True), \
            mock.patch.object(socket, "create_server", no_inet6):
        with listen.listening_socket(listen.ANY, 0) as s:
            assert s.family == socket.AF_INET


def test_a_port_in_use_is_an_error_not_a_fallback():
    with listen.listening_socket("127.0.0.1", 0) as taken:
        with pytest.raises(OSError) as info:
            listen.listening_socket("127.0.0.1", taken.getsockname()[1])
        assert info.value.errno == errno.EADDRINUSE


def test_the_controllers_metrics_server_answers_on_both_families():
    server = serve(0, Metrics(), ready=lambda: True)
    try:
        for host in CLIENTS:
            with urllib.request.urlopen(f"http://{host}:{server.server_port}/readyz", timeout=5) as resp:
                assert resp.status == 200
    finally:
        server.shutdown()
        server.server_close()


async def test_the_webhook_and_its_metrics_port_answer_on_both_families():
    server = WebhookServer(make_app(), tls=None, port=0, metrics_port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            for host in CLIENTS:
                async with session.get(f"http://{host}:{server.port}/readyz") as resp:
                    assert resp.status == 200
                async with session.get(f"http://{host}:{server.probe_port}/metrics") as resp:
                    assert resp.status == 200
    finally:
        await server.stop()
