"""HTTPS load generator for the webhook benchmark (run as its own process).

    python bench/_loadgen.py --url https://127.0.0.1:PORT/mutate --ca ca.crt --body review.json \\
        --mode closed --concurrency 16 --duration 3 [--warmup 0.5] [--max-requests 20000]
    python bench/_loadgen.py ... --mode open --rate 800 --duration 3
    python bench/_loadgen.py --ca ca.crt --body review.json --plan passes.json   # several passes, one process

Closed loop: ``concurrency`` workers each send a request as soon as the previous one is
answered (keep-alive connections, as the API server's webhook client uses). Open loop:
requests are started at a fixed ``rate`` per second whatever the answers (so a slow
server builds a queue instead of slowing the generator down); latency counts from when a
request is sent, and ``lag_p99_ms`` says how late the generator itself sent them against
the schedule (its own CPU starvation, not the server's doing). At most 64 connections
are open (all opened before the schedule starts). The first ``warmup`` seconds (TLS
handshakes, caches) are not counted: in the closed loop, answers that arrive before its end; in the open loop,
requests scheduled before its end. Prints one JSON object: requests, errors,
answered_all (warm-up included), seconds, rate (answered/s), p50_ms, p90_ms, p99_ms,
max_ms, lag_p99_ms, first_response (the decoded body of one answer, to check it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import time


def _pct(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return float("nan")
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (seconds), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_plan(passes: list[dict], ca: str, body_file: str) -> list[dict]:
    """Run the passes one after the other (each with its own connections); with ``pid`` in a
    pass, also the server's CPU ms per answered request (``cpu_ms_per_req``, warm-up included)."""
    ctx = ssl.create_default_context(cafile=ca)
    body = open(body_file, "rb").read()
    out = []
    for p in passes:
        args = argparse.Namespace(**{**PASS_DEFAULTS, **p})
        cpu0 = _cpu_seconds(args.pid) if args.pid else 0.0
        res = await run_pass(args, ctx, body)
        if args.pid:
            res["cpu_ms_per_req"] = (_cpu_seconds(args.pid) - cpu0) * 1000 / max(1, res["answered_all"])
        out.append(res)
    return out


PASS_DEFAULTS = {"url": "", "mode": "closed", "concurrency": 1, "rate": 0.0, "duration": 3.0, "warmup": 0.5,
                 "max_requests": 200_000, "pid": 0}


async def run_pass(args: argparse.Namespace, ctx: ssl.SSLContext, body: bytes) -> dict:
    """One pass against ``args.url`` (fields as :data:`PASS_DEFAULTS`)."""
    import aiohttp

    headers = {"Content-Type": "application/json"}
    limit = args.concurrency if args.mode == "closed" else 64
    connector = aiohttp.TCPConnector(limit=limit, ssl=ctx, force_close=False)
    latencies: list[float] = []
    lags: list[float] = []  # open loop: how late the generator sent each request (ms)
    errors = 0
    answered_all = 0  # warm-up included (the server's CPU time covers those too)
    first: dict = {}
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(scheduled: float, record: bool | None = None) -> None:
            nonlocal errors, first, answered_all
            sent = time.perf_counter()
            try:
                async with session.post(args.url, data=body, headers=headers) as resp:
                    data = await resp.read()
                    ok = resp.status == 200
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
                ok, data = False, b""
            done = time.perf_counter()
            answered_all += ok
            if record is False or (record is None and done < measure_from):
                return
            if not ok:
                errors += 1
                return
            latencies.append((done - sent) * 1000)
            lags.append((sent - scheduled) * 1000)
            if not first:
                first = json.loads(data)

        if args.mode == "open":  # open the pool's connections (TLS handshakes) before the clock starts
            await asyncio.gather(*(one(0.0, False) for _ in range(limit)))
        start = time.perf_counter()
        measure_from = start + args.warmup
        stop_at = measure_from + args.duration
        if args.mode == "closed":

            async def worker() -> None:
                while True:
                    t = time.perf_counter()
                    if t >= stop_at or len(latencies) + errors >= args.max_requests:
                        return
                    await one(t)  # counted when it completes after the warm-up

            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            measured_end = time.perf_counter()
        else:
            interval = 1.0 / args.rate
            tasks = []
            i = 0
            while True:
                scheduled = start + i * interval
                if scheduled >= stop_at or len(tasks) >= args.max_requests:
                    break
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(scheduled, scheduled >= measure_from)))
                i += 1
            await asyncio.gather(*tasks)
            measured_end = stop_at
    seconds = measured_end - measure_from
    lat = sorted(latencies)
    return {
        "mode": args.mode,
        "concurrency": args.concurrency,
        "target_rate": args.rate,
        "requests": len(lat),
        "errors": errors,
        "answered_all": answered_all,
        "seconds": round(seconds, 3),
        "rate": len(lat) / seconds if seconds > 0 else 0.0,
        "p50_ms": _pct(lat, 0.50),
        "p90_ms": _pct(lat, 0.90),
        "p99_ms": _pct(lat, 0.99),
        "max_ms": lat[-1] if lat else float("nan"),
        "lag_p99_ms": _pct(sorted(lags), 0.99) if args.mode == "open" else 0.0,
        "first_response": first,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ca", required=True, help="PEM CA bundle that signed the server certificate")
    ap.add_argument("--body", required=True, help="file holding the AdmissionReview JSON to POST")
    ap.add_argument("--plan", help="JSON file: a list of passes (keys as the flags below, plus pid: the server "
                                   "process whose CPU time to measure); prints a list of results")
    ap.add_argument("--url", help="one pass against this URL")
    ap.add_argument("--mode", choices=("closed", "open"), default="closed")
    ap.add_argument("--concurrency", type=int, default=1, help="closed loop: requests in flight")
    ap.add_argument("--rate", type=float, default=0.0, help="open loop: requests started per second")
    ap.add_argument("--duration", type=float, default=3.0, help="measured seconds (after the warm-up)")
    ap.add_argument("--warmup", type=float, default=0.5, help="seconds not measured at the start")
    ap.add_argument("--max-requests", type=int, default=200_000, help="stop after this many answers")
    ap.add_argument("--pid", type=int, default=0, help="server process whose CPU time to measure")
    args = ap.parse_args()
    if args.plan:
        passes = json.loads(open(args.plan).read())
    elif args.url:
        passes = [{k: getattr(args, k) for k in PASS_DEFAULTS}]
    else:
        ap.error("give --plan or --url")
    for p in passes:
        if p.get("mode") == "open" and not p.get("rate", 0) > 0:
            ap.error("rate must be > 0 in an open-loop pass")
    results = asyncio.run(run_plan(passes, args.ca, args.body))
    print(json.dumps(results if args.plan else results[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
