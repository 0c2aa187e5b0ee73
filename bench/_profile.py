"""Profile a callable with pyinstrument (sampling) and summarise where its time goes.

Used by the benchmarks to explain a missed target with figures: the functions with the
most *self* time (time in their own code, not in the functions they call) and the
most *inclusive* time among our own code (``cogate``).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


def _walk(frame: Any, self_t: dict[str, float], incl_t: dict[str, float], stack: frozenset[str]) -> None:
    key = f"{frame.function} ({frame.file_path_short}:{frame.line_no})" if frame.file_path_short else frame.function
    if frame.is_synthetic:  # a "[self]" or "[await]" leaf: time of the parent's own code
        return
    self_t[key] += frame.total_self_time
    if key not in stack:  # recursion counts once
        incl_t[key] += frame.time
    for child in frame.children:
        _walk(child, self_t, incl_t, stack | {key})


def profile(fn: Callable[[], Any], interval: float = 0.001) -> tuple[float, dict[str, float], dict[str, float]]:
    """Run ``fn`` under pyinstrument; returns (wall seconds, self seconds by function,
    inclusive seconds by function). Function keys: ``name (file:line)``."""
    from pyinstrument import Profiler

    prof = Profiler(interval=interval)
    t0 = time.perf_counter()
    prof.start()
    fn()
    prof.stop()
    wall = time.perf_counter() - t0
    self_t: dict[str, float] = defaultdict(float)
    incl_t: dict[str, float] = defaultdict(float)
    root = prof.last_session.root_frame() if prof.last_session else None
    if root is not None:
        _walk(root, self_t, incl_t, frozenset())
    return wall, dict(self_t), dict(incl_t)


def profile_summary(fn: Callable[[], Any], *, top: int = 6, calls: int = 1, ours: str = "cogate") -> str:
    """One paragraph: ``Profile (pyinstrument, N calls, X ms each): self time: f 41%, g 20%, ...;
    inclusive: ...``. ``calls``: how many passes ``fn`` runs (for the per-call figure);
    ``ours``: path fragment of our code for the inclusive list."""
    wall, self_t, incl_t = profile(fn)
    total = sum(self_t.values()) or 1.0

    def short(key: str) -> str:  # "copies (../controller/capacity.py:162)" -> "copies (capacity.py:162)"
        name, _, where = key.partition(" (")
        return f"{name} ({where.rsplit('/', 1)[-1]}" if where else name

    selfs = sorted(self_t.items(), key=lambda kv: -kv[1])[:top]
    own = sorted(
        ((k, v) for k, v in incl_t.items() if ours in k or "/controller/" in k or "/webhook/" in k),
        key=lambda kv: -kv[1],
    )[1 : top + 1]  # the first is the entry point itself (100 %)
    parts = [f"Profile (pyinstrument, {calls} pass{'es' if calls != 1 else ''}, {wall / calls * 1000:.0f} ms "
             "each under the profiler, which inflates call-heavy code): self time "]
    parts.append(", ".join(f"{short(k)} {v / total:.0%}" for k, v in selfs))
    if own:
        parts.append("; inclusive time in our code: ")
        parts.append(", ".join(f"{short(k)} {v / total:.0%}" for k, v in own))
    parts.append(".")
    return "".join(parts)


#: (category, path fragments of the innermost frame) for py-spy's self-time summary; first match wins.
CATEGORIES = (
    ("idle (waiting in epoll)", ("selectors.py",)),
    ("JSON decode/encode", ("json/",)),
    ("cogate webhook code", ("webhook/",)),
    ("prometheus_client metrics", ("prometheus_client",)),
    ("logging", ("logging/",)),
    ("TLS (ssl, asyncio sslproto)", ("ssl.py", "sslproto.py")),
    ("aiohttp (HTTP parsing, routing, responses)", ("aiohttp/",)),
    ("asyncio event loop and sockets", ("asyncio/",)),
)


def pyspy_record(pid: int, seconds: float, out: str, rate: int = 250, threads: bool = False,
                 extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """Start ``py-spy record`` (raw collapsed stacks into ``out``) on ``pid`` for ``seconds``;
    returns the process (wait on it; SIGINT ends it early, still writing ``out``). ``threads``:
    each stack starts with its thread (:func:`pyspy_summary`); ``extra``: more py-spy flags (``--gil``:
    only samples of the thread holding the GIL). Raises FileNotFoundError without py-spy."""
    import shutil
    import sys
    from pathlib import Path

    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        raise FileNotFoundError("py-spy is not installed (pip install -e '.[bench]')")
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
                             "--rate", str(rate), "--format", "raw", "--output", out, "--nonblocking",
                             *(["--threads"] if threads else []), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def pyspy_categories(raw_file: str, inclusive: tuple[str, ...] = ()) -> tuple[int, dict[str, float], dict[str, float]]:
    """Summarise py-spy's raw output: (samples, share of samples by :data:`CATEGORIES` of the
    innermost frame, inclusive share of each function named in ``inclusive``, e.g. ``"_mutate "``)."""
    by_cat: dict[str, int] = defaultdict(int)
    incl: dict[str, int] = defaultdict(int)
    total = 0
    with open(raw_file) as f:
        for line in f:
            stack, _, n_text = line.rstrip().rpartition(" ")
            if not stack:
                continue
            n = int(n_text)
            total += n
            frames = stack.split(";")
            leaf = frames[-1]
            cat = next((c for c, frags in CATEGORIES if any(fr in leaf for fr in frags)), "other")
            by_cat[cat] += n
            for name in inclusive:
                if any(fr.startswith(name) for fr in frames):
                    incl[name] += n
    total = max(total, 1)
    return total, {k: v / total for k, v in by_cat.items()}, {k: v / total for k, v in incl.items()}


_LINE = re.compile(r":\d+\)$")


def _thread_kind(frame: str) -> str:
    """``thread (1234): cogate-ungate_3`` -> ``cogate-ungate``; ``Thread-1 (run)`` kept as it is."""
    name = frame.partition("): ")[2] or frame
    return re.sub(r"_\d+$", "", name)


def pyspy_summary(raw_file: str, *, top: int = 12, ours: tuple[str, ...] = ("controller/",)) -> dict[str, Any]:
    """Summarise py-spy's raw output recorded with ``--threads``: ``samples``; ``threads``: share of
    samples by thread kind (pool threads merged: ``cogate-ungate``); ``self``: the ``top`` innermost
    frames by share; ``inclusive``: the ``top`` frames of our code (path fragments ``ours``) by
    the share of samples they are on the stack of (each counted once per sample). Shares of all
    samples (without ``--idle``, samples of threads not waiting in a system call)."""
    threads: dict[str, int] = defaultdict(int)
    self_n: dict[str, int] = defaultdict(int)
    incl: dict[str, int] = defaultdict(int)
    total = 0
    with open(raw_file) as f:
        for line in f:
            stack, _, n_text = line.rstrip().rpartition(" ")
            if not stack or not n_text.isdigit():
                continue
            n = int(n_text)
            total += n
            frames = [_LINE.sub(")", fr) for fr in stack.split(";")]  # by function, not by line
            head = frames[0] if frames[0].startswith("thread (") else ""
            body = frames[1:] if head else frames
            threads[_thread_kind(head) if head else "?"] += n
            if body:
                self_n[body[-1]] += n
            for fr in set(body):
                if any(o in fr for o in ours):
                    incl[fr] += n
    total = max(total, 1)

    def share(d: dict[str, int], k: int) -> list[tuple[str, float]]:
        return [(name, round(v / total, 3)) for name, v in sorted(d.items(), key=lambda kv: -kv[1])[:k]]

    return {"samples": total, "threads": share(threads, top), "self": share(self_n, top),
            "inclusive": share(incl, top)}


def pyspy_text(summary: dict[str, Any]) -> str:
    """One paragraph of :func:`pyspy_summary`."""
    def fmt(items: list[tuple[str, float]]) -> str:
        return ", ".join(f"{name} {v:.0%}" for name, v in items)
    return (f"py-spy, {summary['samples']} samples: by thread: {fmt(summary['threads'])}; self time: "
            f"{fmt(summary['self'])}; inclusive (our code): {fmt(summary['inclusive'])}.")
