"""Mooncake Store 0.3.13.post1: with no copy running, a store that needs an evictable object's room is refused (-200); only a retry after the master's eviction thread ran succeeds

Found by `kvoffload check mooncake==0.3.13.post1 --profile strict --assume no-reset-in-flight --seed 1`
(property `liveness`; docs/engines.md calls it a design choice), shrunk to:
    1. prepare_store(['a'])
    2. complete_store(['a']) (drain)
    3. prepare_store(['new0']) (drain)

The spec's rule: D9: after every running copy completed, every slot is free or holds an
evictable block, so a store of one block must be accepted.

This script makes that shape with Mooncake's own API alone (no kvoffload): it moves
itself into a network namespace of its own (loopback only; root, or a user namespace),
starts mooncake_master there and each client as a process of its own, prints every call
and answer, and stops every process it started whatever happens. Needs `pip install
mooncake-transfer-engine-non-cuda==0.3.13.post1` (and Debian's libibverbs1). Exit status
1: the divergence reproduced; 0: it did not; 2: the script could not run. Written by
docs/tools/mooncake_reproducers.py.
"""

from __future__ import annotations

# --- the prelude: the same in every mooncake_*.py script, so each runs pasted alone ---
import contextlib
import ctypes
import ctypes.util
import fcntl
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

VERSION = "0.3.13.post1"
MB16 = 16 << 20  # one block: a 16 MiB object (Mooncake rounds segments to 16 MiB)
PORT = 50051  # the master's RPC port: safe to fix, the namespace is this script's alone
PROCESSES: list[subprocess.Popen[str]] = []  # every process this script started


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: SIGKILL when we die


def namespace() -> None:
    """Move this process into a new network namespace with loopback alone (as root, or
    in a new user namespace), so nothing Mooncake binds can be reached from outside."""
    libc = _libc()
    if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(0x10000000 | 0x40000000) != 0:  # CLONE_NEWUSER | CLONE_NEWNET
            raise RuntimeError("cannot create a network namespace")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # ip link set lo up
        asked = fcntl.ioctl(sock, 0x8913, struct.pack("16sH22x", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sH22x", asked)[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS
    interfaces = [name for _, name in socket.if_nameindex()]
    if interfaces != ["lo"]:
        raise RuntimeError(f"the namespace has interfaces beyond loopback: {interfaces}")


def start(argv: list[str], **pipes: Any) -> subprocess.Popen[str]:
    process = subprocess.Popen(argv, text=True, preexec_fn=_die_with_parent, **pipes)
    PROCESSES.append(process)
    return process


def stop_all() -> None:
    for process in PROCESSES:
        if process.poll() is None:
            process.kill()
        process.wait()


def master() -> subprocess.Popen[str]:
    """The wheel's mooncake_master, Mooncake's defaults but for loopback addresses."""
    binary = Path(importlib.import_module("mooncake").__file__ or "").parent / "mooncake_master"
    process = start([str(binary), f"--rpc_port={PORT}", "--rpc_address=127.0.0.1",
                     "--metrics_host=127.0.0.1", "--enable_http_metadata_server=false"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    for _ in range(300):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", PORT), 0.1):
            print(f"mooncake_master {VERSION} listening on 127.0.0.1:{PORT} (pid {process.pid})")
            return process
        time.sleep(0.05)
    raise RuntimeError("mooncake_master did not start")


def value(fill: str, size: int) -> dict[str, Any]:
    """A put's bytes, as they travel to a client: ``fill`` repeated ``size`` times."""
    return {"fill": fill, "size": size}


def show(item: Any) -> str:
    if isinstance(item, dict) and set(item) == {"fill", "size"}:
        return f"b{item['fill']!r} * {item['size']}"
    if isinstance(item, dict) and set(item) == {"bytes", "first"}:
        return f"<{item['bytes']} bytes" + (f" of {item['first']!r}>" if item["bytes"] else ">")
    return repr(item)


class Client:
    """A MooncakeDistributedStore in a process of its own (this script run with
    --client): each call is sent over a pipe, printed with its answer, and returned."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.process = start([sys.executable, __file__, "--client"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        ready = self._answer()
        if ready != "ready":
            raise RuntimeError(f"client {name}: {ready}")
        print(f"client {name}: setup('127.0.0.1', 'P2PHANDSHAKE', 0, {2 * MB16}, 'tcp', '', "
              f"'127.0.0.1:{PORT}') (pid {self.process.pid})")

    def __call__(self, method: str, *args: Any) -> Any:
        if self.process.stdin is None:
            raise RuntimeError(f"client {self.name} has no pipe")
        self.process.stdin.write(json.dumps([method, list(args)]) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        print(f"  {self.name}.{method}({', '.join(show(a) for a in args)}) -> {show(answer)}",
              flush=True)
        return answer

    def _answer(self) -> Any:
        out = self.process.stdout
        if out is None or not select.select([out], [], [], 120)[0]:
            raise RuntimeError(f"client {self.name} did not answer in 120 s")
        line = out.readline()
        if not line:
            raise RuntimeError(f"client {self.name} ended (exit {self.process.wait()})")
        return json.loads(line)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        print(f"client {self.name}: killed with SIGKILL (pid {self.process.pid})", flush=True)


def _client_main() -> int:
    _die_with_parent()
    store = importlib.import_module("mooncake.store").MooncakeDistributedStore()
    if store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 2 * MB16, "tcp", "",
                   f"127.0.0.1:{PORT}") != 0:
        print(json.dumps("setup failed"), flush=True)
        return 2
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        method, args = json.loads(line)
        args = [a["fill"].encode() * a["size"] if isinstance(a, dict) else a for a in args]
        try:
            answer = getattr(store, method)(*args)
        except Exception as error:  # an answer like any other: printed, judged by the case
            answer = f"raised {type(error).__name__}: {error}"
        if isinstance(answer, bytes):
            answer = {"bytes": len(answer), "first": answer[:1].decode("latin-1")}
        print(json.dumps(answer, default=str), flush=True)
    return 0


def verdict(spec: str, mooncake: str, diverges: bool) -> bool:
    print(f"spec:     {spec}\nMooncake: {mooncake}")
    return diverges


def main() -> int:
    if sys.argv[1:] == ["--client"]:
        return _client_main()
    print(__doc__.strip().splitlines()[0])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))  # so that `finally` runs
    try:
        namespace()
        master()
        reproduced = reproduce()
    except Exception as error:
        print(f"ERROR: the script could not run: {type(error).__name__}: {error}")
        return 2
    finally:
        stop_all()
        left = [p.pid for p in PROCESSES if p.poll() is None]
        print(f"stopped every process this script started ({len(PROCESSES)}; "
              f"still running: {left or 'none'})")
    if reproduced:
        print(f"REPRODUCED: {NAME}: Mooncake {VERSION} diverges from the spec here")
        return 1
    print(f"NOT REPRODUCED: {NAME}: Mooncake {VERSION} answered as the spec demands this time")
    return 0


# --- the finding ---
NAME = 'mooncake_store_refused_after_the_drain'


def reproduce() -> bool:
    writer = Client("writer")
    writer("allocate_and_mount_segment", MB16)  # a tier of 1 slot
    writer("batch_put_session_start", ["a"], [MB16])
    writer("batch_put_session_end", ["a"])  # the drain: no copy is running now
    began = time.monotonic()
    code = writer("batch_put_session_start", ["new0"], [MB16])
    later = code
    while later != [0] and time.monotonic() - began < 20:
        time.sleep(1.0)
        later = writer("batch_put_session_start", ["new0"], [MB16])
    print(f"the retries took {time.monotonic() - began:.1f} s; last answer {later}")
    return verdict(
        "after the drain, prepare_store(['new0']) is accepted (evicting 'a')",
        f"refused at once with {code} (-200: no space); accepted only by a retry "
        f"{'after' if later == [0] else 'not even within 20 s of'} the master's background "
        f"eviction: a scheduler that does not retry sees a tier that never takes a block",
        code == [-200])


if __name__ == "__main__":
    sys.exit(main())
