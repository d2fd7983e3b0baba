"""Mooncake Store's divergences from the kvoffload spec, in Mooncake's own API alone.

Standalone (the standard library and the ``mooncake`` wheel; no kvoffload):

    pip install mooncake-transfer-engine-non-cuda==0.3.13.post1   # + apt libibverbs1
    python docs/tools/mooncake_reproduce.py
    python docs/tools/mooncake_reproduce.py --faults   # kill the holder, then the master

It moves itself into a network namespace of its own (loopback only; root, or a user
namespace), starts ``mooncake_master`` there, a writer client in this process (the
holder of the segment) and a reader client in a child process, and replays the shapes
of the shrunk traces in docs/engines.md. Each case prints what the spec says and what
Mooncake did; the exit status is 1 when any case diverged (as on 0.3.13.post1), else 0.
Every process it started ends with it (SIGKILL when the parent dies).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import importlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MB16 = 16 << 20
PORT = 50051


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _namespace() -> None:
    libc = _libc()
    if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(0x10000000 | 0x40000000) != 0:  # with CLONE_NEWUSER
            raise SystemExit("cannot create a network namespace")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # ip link set lo up
        asked = fcntl.ioctl(sock, 0x8913, struct.pack("16sH22x", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sH22x", asked)[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))


def _client(segment: int) -> Any:
    store = importlib.import_module("mooncake.store").MooncakeDistributedStore()
    if store.setup("127.0.0.1", "P2PHANDSHAKE", segment, 2 * MB16, "tcp", "",
                   f"127.0.0.1:{PORT}") != 0:
        raise SystemExit("client setup failed")
    return store


def _reader_main() -> int:
    _die_with_parent()
    store = _client(0)
    print("ready", flush=True)
    for line in sys.stdin:
        op, key = json.loads(line)
        print(json.dumps(getattr(store, op)(key)), flush=True)
    return 0


def _holder_main() -> int:
    """A writer that holds the segment: two objects READY, one being written."""
    _die_with_parent()
    store = _client(0)
    store.allocate_and_mount_segment(4 * MB16)
    for key in ("h1", "h2"):
        store.batch_put_session_start([key], [MB16])
        store.batch_put_session_end([key])
    store.batch_put_session_start(["h3"], [MB16])
    print("ready", flush=True)
    sys.stdin.read()
    return 0


def _replacement_main() -> int:
    """The holder's replacement, started at once: a segment of one object, then the
    put the dead holder had open (h3) again, and two new objects in that one slot."""
    _die_with_parent()
    store = _client(0)
    store.allocate_and_mount_segment(MB16)
    codes = {key: (list(store.batch_put_session_start([key], [MB16])),
                   list(store.batch_put_session_end([key]))) for key in ("h3", "n1", "n2")}
    print(json.dumps(codes), flush=True)
    sys.stdin.read()
    return 0


def _master() -> subprocess.Popen[bytes]:
    package = Path(importlib.import_module("mooncake").__file__ or "").parent
    master = subprocess.Popen(
        [str(package / "mooncake_master"), f"--rpc_port={PORT}", "--rpc_address=127.0.0.1",
         "--metrics_host=127.0.0.1", "--enable_http_metadata_server=false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    for _ in range(300):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", PORT), 0.1):
            break
        time.sleep(0.05)
    return master


def _faults() -> int:
    """Kill the holder of the segment, then the master, and say what a reader sees."""
    master = _master()
    try:
        holder = subprocess.Popen([sys.executable, __file__, "--holder"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  preexec_fn=_die_with_parent)
        if holder.stdout is None:
            raise SystemExit("the holder has no pipes")
        holder.stdout.readline()
        reader = _client(0)
        keys = ("h1", "h2", "h3")
        print("before: get_size", [reader.get_size(k) for k in keys],
              "get('h1') bytes", len(reader.get("h1")))
        holder.kill()
        holder.wait()
        start = time.monotonic()
        replacement = subprocess.Popen(
            [sys.executable, __file__, "--replacement"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        if replacement.stdout is None:
            raise SystemExit("the replacement has no pipes")
        codes = json.loads(replacement.stdout.readline())
        print(f"{time.monotonic() - start:4.1f} s after the holder was killed, its "
              f"replacement (a segment of ONE object) put again the key the dead holder "
              f"was writing, then two new ones: (put start, put end) codes {codes}")
        print("  bytes a get reads back of the two new objects:",
              {k: len(reader.get(k)) for k in ("n1", "n2")},
              "(0: lost; D15 allows losing only what the failed holder held)")
        while time.monotonic() - start < 30:
            sizes = [reader.get_size(k) for k in keys]
            print(f"{time.monotonic() - start:4.1f} s after the holder was killed: get_size "
                  f"{sizes}, get('h1') bytes {len(reader.get('h1'))}", flush=True)
            if sizes[0] < 0:
                break
            time.sleep(1.0)
        master.kill()
        master.wait()
        master = _master()
        time.sleep(1.0)
        print("after the master was killed and restarted: get_size",
              [reader.get_size(k) for k in keys], "(-900 is an RPC error)")
        return 1
    finally:
        master.kill()


def main() -> int:
    if sys.argv[1:] == ["--reader"]:
        return _reader_main()
    if sys.argv[1:] == ["--holder"]:
        return _holder_main()
    if sys.argv[1:] == ["--replacement"]:
        return _replacement_main()
    _namespace()
    if sys.argv[1:] == ["--faults"]:
        return _faults()
    master = _master()
    try:
        reader = subprocess.Popen([sys.executable, __file__, "--reader"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  preexec_fn=_die_with_parent)
        into, out = reader.stdin, reader.stdout
        if into is None or out is None:
            raise SystemExit("the reader has no pipes")
        out.readline()

        def ask(op: str, key: str) -> Any:
            into.write(json.dumps([op, key]) + "\n")
            into.flush()
            return json.loads(out.readline())

        return _cases(_client(0), ask)
    finally:
        master.kill()


def _cases(writer: Any, ask: Any) -> int:
    diverged = 0

    def case(name: str, spec: str, observed: str, same: bool) -> None:
        nonlocal diverged
        diverged += not same
        print(f"{'same' if same else 'DIVERGES'}  {name}\n    spec:     {spec}\n"
              f"    Mooncake: {observed}")

    def tier(slots: int) -> list[str]:
        ids: list[str] = writer.allocate_and_mount_segment(slots * MB16)["segment_ids"]
        return ids

    def drop(ids: list[str]) -> None:
        writer.remove_all(True)
        writer.unmount_and_free_segment(ids)

    # 1. prepare_store(['a']), lookup('a') from another client
    ids = tier(4)
    writer.batch_put_session_start(["1a"], [MB16])
    size, exists = ask("get_size", "1a"), ask("is_exist", "1a")
    case("lookup of a key being stored (strict profile)", "PENDING",
         f"get_size {size} (-703: not ready), is_exist {exists}", size == -703)
    case("lookup of a key being stored, through is_exist", "PENDING (the safe profile "
         "allows MISS: is_exist is a safe-profile lookup)",
         f"is_exist {exists}: the same answer as for an absent key", exists != 0)
    writer.batch_put_session_end(["1a"])
    drop(ids)

    # 2. prepare_store(['a']), complete_store(['a']), prepare_store(['b']) on 1 slot
    ids = tier(1)
    writer.batch_put_session_start(["2a"], [MB16])
    writer.batch_put_session_end(["2a"])
    code = writer.batch_put_session_start(["2b"], [MB16])[0]
    case("a store on a full tier with an unread READY block", "accepted, evicting 'a'",
         f"batch_put_session_start answered {code} (-200: no space), evicting nothing",
         code == 0)
    drop(ids)

    # 3. prepare_store(['a', 'b']), complete_store(['a', 'b']), then nothing: lookup('a')
    ids = tier(2)
    writer.batch_put_session_start(["3a", "3b"], [MB16, MB16])
    writer.batch_put_session_end(["3a", "3b"])
    time.sleep(1.0)
    left = [k for k in ("3a", "3b") if writer.is_exist(k) == 1]
    case("READY blocks when no call is made (the tier is 100 % full)", "both stay READY",
         f"after 1 s, still there: {left} (the master evicts in the background from 90 %)",
         len(left) == 2)
    drop(ids)

    # 4. prepare_store(['a']), reset_cache(), lookup('a')
    ids = tier(2)
    writer.batch_put_session_start(["4a"], [MB16])
    writer.remove_all(True)
    size = ask("get_size", "4a")
    case("a reset while a store is in flight, then lookup", "MISS (the reset drops it)",
         f"get_size {size} (-703: still being written; remove_all skips it)", size == -704)
    writer.batch_put_session_end(["4a"])
    drop(ids)

    # 5. prepare_store(['a']), complete_store(['a']), lookup('a') (a lease), then evictable?
    ids = tier(2)
    writer.batch_put_session_start(["5a"], [MB16])
    writer.batch_put_session_end(["5a"])
    ask("get_size", "5a")
    code = writer.remove("5a")
    case("after a lookup, is the block still free to go (lookup changes nothing)",
         "yes: a lookup pins nothing", f"remove answered {code} (-706: it holds a lease, "
         f"10 s by default)", code == 0)
    drop(ids)
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
