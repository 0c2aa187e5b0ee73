"""The webhook benchmark's baseline: a bare aiohttp HTTPS handler answering every
``POST /mutate`` with one fixed AdmissionReview response (read from a file), and
``GET /healthz`` with ok. Same framework, TLS setup and response bytes as the real
webhook, none of its work (parsing, deciding, metrics).

    python bench/_bare_webhook.py --port 9443 --cert tls.crt --key tls.key --response response.json \
        [--parse] [--echo-uid]

``--parse`` also decodes each request body with ``json.loads`` (and drops the result): the
floor of any Python webhook that reads the review. ``--echo-uid`` answers with the request's
``request.uid`` in place of the response file's (kube-apiserver refuses an answer whose uid is not
its request's): read from the bytes when ``request`` starts with its ``uid``, as kube-apiserver
encodes it (``AdmissionRequest``'s first field), else with ``json.loads``.
``GET /stats``: ``{"requests": N, "connections": N}``, the ``/mutate`` requests answered and the
connections that carried them (counted at their first one, as cogate's
``cogate_webhook_connections_total``).
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import weakref

from aiohttp import web


UID_MARK = "\x00uid\x00"
REQUEST_UID = b'"request":{"uid":"'


def split_at_uid(response: bytes) -> tuple[bytes, bytes]:
    """The JSON encoding of the AdmissionReview ``response`` cut where its ``response.uid`` string's
    content goes: ``head + uid + tail`` is the same answer for ``uid`` (a JSON-safe string)."""
    review = json.loads(response)
    review["response"]["uid"] = UID_MARK
    head, _, tail = json.dumps(review, separators=(",", ":")).encode().partition(json.dumps(UID_MARK)[1:-1].encode())
    return head, tail


def request_uid(body: bytes) -> bytes:
    """``request.uid`` of an AdmissionReview body, JSON-escaped: a byte search when ``request`` begins
    with its uid (kube-apiserver's encoding), else ``json.loads``."""
    start = body.find(REQUEST_UID)
    if start >= 0:
        start += len(REQUEST_UID)
        end = body.find(b'"', start)
        if end > start and b"\\" not in body[start:end]:
            return body[start:end]
    return json.dumps(json.loads(body)["request"]["uid"])[1:-1].encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--response", required=True, help="file with the JSON body of every answer")
    ap.add_argument("--parse", action="store_true", help="json.loads every request body")
    ap.add_argument("--echo-uid", action="store_true", help="answer with each request's request.uid")
    args = ap.parse_args()
    fixed = open(args.response, "rb").read()
    parse = args.parse
    head, tail = split_at_uid(fixed) if args.echo_uid else (fixed, b"")
    seen: weakref.WeakSet = weakref.WeakSet()
    stats = {"requests": 0, "connections": 0}

    async def mutate(request: web.Request) -> web.Response:
        body = await request.read()
        stats["requests"] += 1
        transport = request.transport
        if transport is not None and transport not in seen:
            seen.add(transport)
            stats["connections"] += 1
        if parse:
            json.loads(body)
        if args.echo_uid:
            return web.Response(body=head + request_uid(body) + tail, content_type="application/json")
        return web.Response(body=fixed, content_type="application/json")

    async def stats_(request: web.Request) -> web.Response:
        return web.json_response(stats)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    app = web.Application(client_max_size=6 * 1024 * 1024)
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/stats", stats_)
    web.run_app(app, host=args.host, port=args.port, ssl_context=ctx, access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
