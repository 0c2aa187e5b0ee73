"""The webhook benchmark's baseline: a bare aiohttp HTTPS handler answering every
``POST /mutate`` with one fixed AdmissionReview response (read from a file), and
``GET /healthz`` with ok. Same framework, TLS setup and response bytes as the real
webhook, none of its work (parsing, deciding, metrics).

    python bench/_bare_webhook.py --port 9443 --cert tls.crt --key tls.key --response response.json [--parse]

``--parse`` also decodes each request body with ``json.loads`` (and drops the result): the
floor of any Python webhook that reads the review.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys

from aiohttp import web


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--response", required=True, help="file with the JSON body of every answer")
    ap.add_argument("--parse", action="store_true", help="json.loads every request body")
    args = ap.parse_args()
    fixed = open(args.response, "rb").read()
    parse = args.parse

    async def mutate(request: web.Request) -> web.Response:
        body = await request.read()
        if parse:
            json.loads(body)
        return web.Response(body=fixed, content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    app = web.Application(client_max_size=6 * 1024 * 1024)
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host=args.host, port=args.port, ssl_context=ctx, access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
