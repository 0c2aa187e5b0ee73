"""Pod creators for the admission-rate benchmark (run as its own process, so its CPU is not the
benchmark's and its event loop shares no GIL with the watches).

    python bench/_creators.py --kubeconfig KC --namespace NS --body pod.json \\
        --concurrency 100 --count 1500 --prefix p

``concurrency`` creators, each POSTing pods to ``/api/v1/namespaces/NS/pods`` one after the
other as soon as the previous create is answered (closed loop, as ReplicaSet controllers wait
on each create), until ``count`` pods were created in all. The body is ``--body`` (a Pod
manifest) with ``metadata.name`` replaced by ``<prefix>-<i>``. One keep-alive TLS connection
per creator (aiohttp, client certificate from the kubeconfig, which must name files). Prints
one JSON object: created, errors (status -> count), seconds (first send to last answer), rate
(created/s), p50_ms, p99_ms (create latency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import time

import aiohttp
import yaml


def _ssl_context(kubeconfig: str) -> tuple[str, ssl.SSLContext]:
    """The server URL and a client TLS context of the kubeconfig's current context."""
    with open(kubeconfig) as f:
        kc = yaml.safe_load(f)
    ctx_name = kc["current-context"]
    context = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in kc["users"] if u["name"] == context["user"])
    ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    return cluster["server"], ctx


async def run(args: argparse.Namespace) -> dict:
    server, ctx = _ssl_context(args.kubeconfig)
    with open(args.body, "rb") as f:
        template = json.load(f)
    url = f"{server}/api/v1/namespaces/{args.namespace}/pods"
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counter = iter(range(args.count))
    connector = aiohttp.TCPConnector(ssl=ctx, limit=args.concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def creator() -> None:
            for i in counter:
                template["metadata"]["name"] = f"{args.prefix}-{i}"
                body = json.dumps(template).encode()
                t = time.perf_counter()
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    if resp.status == 201:
                        latencies.append(time.perf_counter() - t)
                    else:
                        errors[str(resp.status)] = errors.get(str(resp.status), 0) + 1
        t0 = time.perf_counter()
        await asyncio.gather(*(creator() for _ in range(args.concurrency)))
        seconds = time.perf_counter() - t0
    latencies.sort()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2) if latencies else -1.0
    return {"created": len(latencies), "errors": errors, "seconds": round(seconds, 3),
            "rate": round(len(latencies) / seconds, 1) if seconds else 0.0, "p50_ms": pct(0.5), "p99_ms": pct(0.99)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--body", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--prefix", default="p")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
