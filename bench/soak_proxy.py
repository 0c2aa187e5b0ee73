"""A faulty HTTPS proxy between cogate's controller and kube-apiserver (the chaos soak, issue 35).

The controller's kubeconfig points here (``https://127.0.0.1:<port>``, this proxy's own CA, no
credentials); the proxy terminates TLS and sends each request on to kube-apiserver as the user of
the client certificate it is given (the soak's admin), streaming the answer back (watches
included). HTTP-level faults need the request in clear, hence TLS termination rather than a TCP
relay. Faults, set from any thread:

- :meth:`FaultyProxy.set_latency`: every request waits that many seconds before it is sent on;
- :meth:`FaultyProxy.set_errors`: that fraction of requests (watches excepted) is answered by the
  proxy with 429 (``Retry-After: 1``), 500 or 503 and a ``Status`` body, as an overloaded
  kube-apiserver answers;
- :meth:`FaultyProxy.stall`: new requests wait and open streams stop forwarding, connections
  kept open (half-open watches: the client sees no error, only silence) until
  :meth:`FaultyProxy.resume`;
- :meth:`FaultyProxy.drop`: every open connection is cut at once (TCP reset of the client side).

The random choices (which request gets an error) come from a ``random.Random`` seeded by the
soak, so a run replays. aiohttp serves and forwards (a dependency cogate has already).
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
from pathlib import Path

import aiohttp
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade", "content-encoding"}


class FaultyProxy:
    """The proxy, on its own thread and event loop. ``upstream``: ``https://127.0.0.1:<port>``;
    ``ca_file``: the upstream's CA; ``client_cert``/``client_key``: what the proxy presents upstream;
    ``cert``/``key``: its own serving pair; ``seed``: of the error choices."""

    def __init__(self, upstream: str, ca_file: Path, client_cert: Path, client_key: Path, cert: Path, key: Path,
                 seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self._up_ctx = ssl.create_default_context(cafile=str(ca_file))
        self._up_ctx.load_cert_chain(str(client_cert), str(client_key))
        self._ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ctx.load_cert_chain(str(cert), str(key))
        self._rng = random.Random(seed)
        self.latency = 0.0
        self.error_rate = 0.0
        self.port = 0
        self.counts = {"requests": 0, "errors": 0, "dropped": 0}
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._open: set[asyncio.Transport] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="soak-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> "FaultyProxy":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._up_ctx, limit=0),
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                                              auto_decompress=False)
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ctx)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if not self._thread.is_alive():
            return

        async def _stop() -> None:
            assert self._runner is not None and self._session is not None and self._flowing is not None
            self._flowing.set()
            for tr in list(self._open):  # open watches would hold the cleanup for their whole timeout
                tr.abort()
            try:
                await asyncio.wait_for(self._runner.cleanup(), 10)
            except asyncio.TimeoutError:
                pass
            await self._session.close()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    # -- faults (any thread) ------------------------------------------------------
    def set_latency(self, seconds: float) -> None:
        self.latency = max(0.0, float(seconds))

    def set_errors(self, rate: float) -> None:
        self.error_rate = min(1.0, max(0.0, float(rate)))

    def stall(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._flowing.clear())  # type: ignore[union-attr]

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(lambda: self._flowing.set())  # type: ignore[union-attr]

    def drop(self) -> int:
        """Cut every open connection; returns how many."""
        async def _drop() -> int:
            n = 0
            for tr in list(self._open):
                tr.abort()
                n += 1
            self._open.clear()
            return n
        n = asyncio.run_coroutine_threadsafe(_drop(), self._loop).result(10)
        self.counts["dropped"] += n
        return n

    # -- serving ------------------------------------------------------------------
    def _error(self) -> web.Response:
        code = self._rng.choice((429, 429, 500, 503))
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}[code]
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f"soak proxy: injected {code}", "reason": reason, "code": code,
                "details": {"retryAfterSeconds": 1}}
        self.counts["errors"] += 1
        return web.Response(status=code, body=json.dumps(body).encode(), content_type="application/json",
                            headers={"Retry-After": "1"})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._flowing is not None and self._session is not None
        tr = request.transport
        resp: web.StreamResponse | None = None
        if tr is not None:
            self._open.add(tr)  # type: ignore[arg-type]
        try:
            self.counts["requests"] += 1
            await self._flowing.wait()
            if self.latency:
                await asyncio.sleep(self.latency)
            watch = request.query.get("watch") in ("1", "true")
            if not watch and self.error_rate and self._rng.random() < self.error_rate:
                return self._error()
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
            async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                             data=body or None, allow_redirects=False,
                                             # no Content-Type in: none out (the Python client sends some
                                             # bodies without one; aiohttp would add application/octet-stream)
                                             skip_auto_headers=("Content-Type",)) as up:
                resp = web.StreamResponse(status=up.status, headers={k: v for k, v in up.headers.items()
                                                                     if k.lower() not in HOP})
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await self._flowing.wait()
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        except (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError) as exc:
            if resp is not None and resp.prepared:
                return resp  # cut mid-stream: the client sees the stream end
            return web.Response(status=502, text=f"soak proxy: upstream {exc}")
        finally:
            if tr is not None:
                self._open.discard(tr)  # type: ignore[arg-type]
