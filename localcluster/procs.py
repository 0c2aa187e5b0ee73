"""Child processes of the local environment: free ports, start, readiness, stop, log tails.

One set of helpers for every process the local environment runs: the control plane
(:mod:`cogate.localcluster.cluster`), the real node (:mod:`cogate.localcluster.host.realnode`),
cogate's webhook and controller (:mod:`cogate.localcluster.stack`), ``cogate dev down``
and the end-to-end tests.

- :func:`spawn` starts a process in its own session (a Ctrl-C in the terminal reaches only
  the Python process), stdin from ``/dev/null``, stdout and stderr appended to one log file.
- :class:`Proc` is a started process, or one re-attached by pid from a state file (then
  ``binary`` guards against pid reuse: the pid must still run that executable).
- :func:`terminate` stops a list of processes: SIGTERM in reverse order, SIGKILL after a grace
  period, and reports what survived.
- :func:`wait_http` polls a readiness URL while checking the process is alive; its error
  ends with the process's log tail (:func:`tail`).
- :func:`mounts` lists this mount namespace's mount points (a cluster's work dir is never
  deleted through one).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable, Mapping, Sequence

__all__ = [
    "Proc",
    "spawn",
    "terminate",
    "wait_http",
    "free_ports",
    "free_port",
    "port_open",
    "wait_ports_closed",
    "process_alive",
    "cmdline",
    "rss_bytes",
    "mounts",
    "tail",
]


# ------------------------------------------------------------------------ ports

def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (kernel-assigned ephemeral ports)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One TCP port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_ports_closed(ports: Iterable[int], timeout: float, host: str = "127.0.0.1") -> list[str]:
    """Wait up to ``timeout`` s until no port of ``ports`` accepts connections on ``host``; problems found (empty: ok)."""
    deadline = time.monotonic() + timeout
    ports = list(ports)
    while True:
        still = [p for p in ports if port_open(p, host)]
        if not still:
            return []
        if time.monotonic() >= deadline:
            return [f"port(s) {still} still accept connections"]
        time.sleep(0.1)


# ------------------------------------------------------------------ /proc reads

def process_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (read from ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def cmdline(pid: int) -> list[str]:
    """Command line of ``pid`` (``/proc/<pid>/cmdline``); empty when it is gone."""
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (``VmRSS`` of ``/proc/<pid>/status``), 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def mounts() -> list[str]:
    """Mount points of this mount namespace (``/proc/self/mountinfo``, octal escapes decoded)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        out.append(point.encode().decode("unicode_escape"))
    return out


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the log file ``path`` (or a note that it is missing or empty)."""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:]) or "(empty log)"


# -------------------------------------------------------------------- processes

@dataclass
class Proc:
    """A child process: ``name`` (for messages), ``pid``, ``binary`` (``argv[0]``), ``log`` file.

    ``popen`` is None when re-attached from a state file; :meth:`alive` then also checks that
    the pid still runs ``binary`` (guards against pid reuse after a reboot or a long time).
    """

    name: str
    pid: int
    binary: str
    log: Path
    popen: subprocess.Popen | None = None

    @property
    def returncode(self) -> int | None:
        """Exit code when started here and exited, else None."""
        return self.popen.poll() if self.popen is not None else None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return process_alive(self.pid) and self._is_ours()

    def _is_ours(self) -> bool:
        cmd = cmdline(self.pid)
        return bool(cmd) and cmd[0] == self.binary

    def signal(self, sig: int) -> None:
        """Send ``sig`` if the process is alive (ours); a vanished process is not an error."""
        if not self.alive():
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the process to exit (reaping it when started here); True when gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None:
                try:
                    self.popen.wait(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if not self.alive():
                return True
            time.sleep(0.05)
        return not self.alive()

    def stop(self, grace: float = 10.0) -> bool:
        """SIGTERM, SIGKILL after ``grace`` s; True when the process is gone."""
        return not terminate([self], grace)


def spawn(name: str, argv: Sequence[str], log: Path, *, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> Proc:
    """Start ``argv`` in a new session; stdout and stderr appended to ``log``, stdin ``/dev/null``.

    ``env``: the full environment (default: this process's). Raises ``OSError`` when the
    executable cannot be started.
    """
    with open(log, "ab") as out:
        popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True)
    return Proc(name, popen.pid, argv[0], Path(log), popen)


def terminate(procs: Sequence[Proc], grace: float, *, ordered_grace: float = 3.0) -> list[str]:
    """Stop ``procs``: SIGTERM each in reverse order (waiting up to ``ordered_grace`` s for each,
    so later components do not log a storm of errors against an earlier one already gone),
    SIGKILL whatever is left after ``grace`` s. Returns problems (processes surviving SIGKILL)."""
    for proc in reversed(procs):
        proc.signal(signal.SIGTERM)
        proc.wait(min(grace, ordered_grace))
    for proc in reversed(procs):
        if not proc.wait(grace):
            proc.signal(signal.SIGKILL)
    problems = []
    for proc in procs:
        if not proc.wait(5.0):
            problems.append(f"{proc.name} (pid {proc.pid}) still running after SIGKILL")
    return problems


def wait_http(proc: Proc, url: str, *, timeout: float, context: ssl.SSLContext | None = None,
              ok: Callable[[bytes], bool] | None = None, what: str | None = None,
              error: type[Exception] = RuntimeError, headers: Mapping[str, str] | None = None,
              data: bytes | None = None, statuses: Collection[int] = (200,)) -> None:
    """Poll ``url`` every 0.1 s until it answers an HTTP status of ``statuses`` (default 200; and
    ``ok(body)`` when given). ``data``: POST it (default: GET).

    Raises ``error`` (message: what was awaited, the last answer, the log tail of ``proc``)
    when ``proc`` exits or ``timeout`` s pass.
    """
    deadline = time.monotonic() + timeout
    last = "no attempt"
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    while True:
        if not proc.alive():
            raise error(f"{proc.name} exited (code {proc.returncode}); last lines of {proc.log}:\n{tail(proc.log)}")
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as resp:
                body = resp.read()
                if resp.status in statuses and (ok is None or ok(body)):
                    return
                last = f"HTTP {resp.status}: {body[:200]!r}"
        except urllib.error.HTTPError as exc:
            body = exc.read()
            if exc.code in statuses and (ok is None or ok(body)):
                return
            last = f"HTTP {exc.code}: {body[:300]!r}"
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            last = str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            raise error(f"{proc.name} not ready after {timeout:.0f}s: {what or url} -> {last}; "
                        f"last lines of {proc.log}:\n{tail(proc.log)}")
        time.sleep(0.1)
