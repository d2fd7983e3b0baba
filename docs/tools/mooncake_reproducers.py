"""Write docs/reproducers/mooncake_*.py: each Mooncake finding of docs/engines.md as a
standalone script in Mooncake's own API (no kvoffload in it), and record what each
printed when run.

    python docs/tools/mooncake_reproducers.py            # write every script
    python docs/tools/mooncake_reproducers.py --run      # ... and run each, writing
                                                         # <name>.out and index.json
    python docs/tools/mooncake_reproducers.py --run --only mooncake_full_tier_rejects

The Mooncake adapter records its calls as text (``MooncakeAdapter.engine_calls``), so
these scripts cannot be replayed from the suite's record as LMCache's and vLLM's are
(docs/tools/engine_reproducers.py): each is written here by hand, as the shape of the
shrunk trace in docs/engines.md made with Mooncake's calls. Every script is the same
prelude (a network namespace of its own with loopback alone, its own ``mooncake_master``,
each client a process of its own driven over a pipe, every process stopped whatever
happens) followed by one finding's ``reproduce()``; the prelude is repeated in each on
purpose, so that a script runs pasted alone. Exit status 1: the divergence reproduced;
0: it did not (the last line says so); 2: the script could not run.
tests/conformance/test_mooncake_reproducers.py checks that the committed scripts are
what this writes, and runs them (markers ``mooncake``, ``slow``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "reproducers"
TARGET = "mooncake==0.3.13.post1"


@dataclass(frozen=True)
class Finding:
    """One Mooncake finding: what the index and the script's docstring say of it, and
    the body of its ``reproduce()`` (Mooncake's calls through the prelude's clients)."""

    name: str
    kind: str  # "bug" or "design"
    what: str
    prop: str
    options: str
    trace: tuple[str, ...]
    rule: str
    body: str


PRELUDE = '''
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
        self.process.stdin.write(json.dumps([method, list(args)]) + "\\n")
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
    print(f"spec:     {spec}\\nMooncake: {mooncake}")
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
'''


def script(finding: Finding) -> str:
    """The text of one finding's script."""
    trace = "\n".join(f"    {i}. {call}" for i, call in enumerate(finding.trace, 1))
    doc = (f'"""Mooncake Store 0.3.13.post1: {finding.what}\n\n'
           f"Found by `kvoffload check {TARGET} {finding.options}`\n"
           f"(property `{finding.prop}`; docs/engines.md calls it "
           f"{'a bug' if finding.kind == 'bug' else 'a design choice'}), shrunk to:\n"
           f"{trace}\n\n"
           + textwrap.fill(f"The spec's rule: {finding.rule}", 88) + "\n\n"
           + textwrap.fill(
               "This script makes that shape with Mooncake's own API alone (no kvoffload): "
               "it moves itself into a network namespace of its own (loopback only; root, "
               "or a user namespace), starts mooncake_master there and each client as a "
               "process of its own, prints every call and answer, and stops every process "
               "it started whatever happens. Needs `pip install "
               "mooncake-transfer-engine-non-cuda==0.3.13.post1` (and Debian's libibverbs1). "
               "Exit status 1: the divergence reproduced; 0: it did not; 2: the script "
               "could not run. Written by docs/tools/mooncake_reproducers.py.", 88)
           + '\n"""\n')
    body = textwrap.indent(textwrap.dedent(finding.body).strip("\n"), "    ")
    return (doc + "\nfrom __future__ import annotations\n"
            + PRELUDE
            + f"\n\n# --- the finding ---\nNAME = {finding.name!r}\n\n\n"
            + "def reproduce() -> bool:\n" + body + "\n\n\n"
            + 'if __name__ == "__main__":\n    sys.exit(main())\n')


FINDINGS = [
    Finding(
        name="mooncake_is_exist_misses_a_put_in_flight",
        kind="design",
        what="is_exist and get answer as for an absent key while a put is in flight",
        prop="lookup",
        options="--profile strict (a lookup through is_exist)",
        trace=("prepare_store(['a'])", "lookup('a')"),
        rule="D1: a lookup answers PENDING iff the block is STORING (the strict profile); "
             "the safe profile lets PENDING read as MISS, never as HIT.",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", 2 * MB16)
        writer("batch_put_session_start", ["a"], [MB16])  # prepare_store(['a'])
        exists, got = reader("is_exist", "a"), reader("get", "a")  # lookup('a')
        size = reader("get_size", "a")
        absent = reader("is_exist", "z"), reader("get", "z"), reader("get_size", "z")
        writer("batch_put_session_end", ["a"])
        return verdict(
            "lookup('a') of a block being stored: PENDING (the safe profile allows MISS)",
            f"is_exist {exists} and get {show(got)} from another client, as for the absent "
            f"key 'z' (is_exist {absent[0]}, get {show(absent[1])}); only get_size tells "
            f"them apart: {size} (-703 REPLICA_IS_NOT_READY) vs {absent[2]} (-704)",
            exists == absent[0] == 0 and got["bytes"] == 0)
        """,
    ),
    Finding(
        name="mooncake_put_of_a_present_key_reports_success",
        kind="design",
        what="a plain put of a key already present or being put returns 0 and writes nothing "
             "(the first writer wins)",
        prop="store-plan",
        options="--profile safe (a lookup through is_exist, a store through put)",
        trace=("prepare_store(['a'])", "lookup('a')", "prepare_store(['a'])"),
        rule="D13: a key already present in prepare_store (STORING or READY) is skipped, "
             "and the plan says so (it stores only the absent keys, store-plan): a store "
             "that reports success must have stored the caller's bytes.",
        body="""
        first, second = Client("first"), Client("second")
        first("allocate_and_mount_segment", 2 * MB16)
        first("put", "a", value("A", 1 << 20))  # READY with the first writer's bytes
        second("is_exist", "a")
        put_a = second("put", "a", value("B", 1 << 20))  # a second store of 'a'
        read_a = second("get", "a")
        first("batch_put_session_start", ["b"], [1 << 20])  # 'b' being stored
        seen_b = second("is_exist", "b")  # the safe profile's lookup: MISS
        put_b = second("put", "b", value("B", 1 << 20))  # so the scheduler stores it again
        first("batch_put_session_end", ["b"])
        read_b = second("get", "b")
        lost = [k for k, put, read in (("a", put_a, read_a), ("b", put_b, read_b))
                if put == 0 and read["first"] != "B"]
        return verdict(
            "a store of a key READY or STORING stores nothing and says so",
            f"put answered {put_a} for 'a' (READY) and {put_b} for 'b' (being put; is_exist "
            f"{seen_b}): success, but a get reads {show(read_a)} and {show(read_b)}: the "
            f"second writer's bytes were not written for {lost}",
            bool(lost))
        """,
    ),
    Finding(
        name="mooncake_full_tier_rejects_instead_of_evicting",
        kind="design",
        what="a put on a full segment with an unread READY object fails at once (-200) "
             "instead of evicting it",
        prop="rejection",
        options="--profile strict --assume no-reset-in-flight --seed 1",
        trace=("prepare_store(['a'])", "complete_store(['a'])", "prepare_store(['b'])"),
        rule="D3: prepare_store rejects only when free slots plus evictable blocks are "
             "fewer than the new keys; otherwise it accepts and evicts. 'a' is READY "
             "with no reader: evictable.",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", MB16)  # a tier of 1 slot
        writer("batch_put_session_start", ["a"], [MB16])
        writer("batch_put_session_end", ["a"])
        code = writer("batch_put_session_start", ["b"], [MB16])
        still = reader("is_exist", "a")
        return verdict(
            "prepare_store(['b']) is accepted and evicts 'a'",
            f"batch_put_session_start answered {code} (-200: no space) at once; "
            f"'a' is still there (is_exist {still}): a put never evicts",
            code == [-200])
        """,
    ),
    Finding(
        name="mooncake_store_refused_after_the_drain",
        kind="design",
        what="with no copy running, a store that needs an evictable object's room is "
             "refused (-200); only a retry after the master's eviction thread ran succeeds",
        prop="liveness",
        options="--profile strict --assume no-reset-in-flight --seed 1",
        trace=("prepare_store(['a'])", "complete_store(['a']) (drain)",
               "prepare_store(['new0']) (drain)"),
        rule="D9: after every running copy completed, every slot is free or holds an "
             "evictable block, so a store of one block must be accepted.",
        body="""
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
        """,
    ),
    Finding(
        name="mooncake_background_eviction_drops_a_ready_block",
        kind="design",
        what="the master drops READY unread objects in a thread of its own, between calls",
        prop="lookup",
        options="--profile strict --assume no-reset-in-flight --seed 1 --eviction on-store",
        trace=("prepare_store(['d', 'd'])", "complete_store(['d'])",
               "prepare_load(['d', 'c'])"),
        rule="D4 and D14: a READY block leaves only when a prepare_store evicts it or a "
             "reset drops it; a block gone between two calls is the environment's "
             "evict_in_background, allowed only under --eviction background (the default "
             "of mooncake== targets since D14).",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", 2 * MB16)  # a tier of 2 slots
        writer("batch_put_session_start", ["a", "b"], [MB16, MB16])
        writer("batch_put_session_end", ["a", "b"])
        time.sleep(2.0)  # no call for 2 s
        there = reader("batch_is_exist", ["a", "b"])
        return verdict(
            "with no call made, both READY blocks stay (under --eviction on-store)",
            f"after 2 s without a call, batch_is_exist answers {there}: the master evicted "
            f"{[k for k, e in zip('ab', there) if e != 1]} in the background (it evicts "
            f"from 90 % full, and the segment is 100 % full)",
            there != [1, 1])
        """,
    ),
    Finding(
        name="mooncake_lookup_grants_a_lease",
        kind="design",
        what="is_exist and get_size grant the reader a lease: for 10 s the object cannot be "
             "removed (-706)",
        prop="lookup (D1: a lookup changes nothing)",
        options="(no verdict: shown by probing)",
        trace=("prepare_store(['a'])", "complete_store(['a'])", "lookup('a')"),
        rule="D1: a lookup is pure, the state is returned unchanged: after lookup('a') the "
             "block is as free to go as before it (D4: READY with no readers).",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", 2 * MB16)
        writer("batch_put_session_start", ["a", "b"], [MB16, MB16])
        writer("batch_put_session_end", ["a", "b"])
        reader("get_size", "a")  # lookup('a'); 'b' is not looked up
        code_a, code_b = writer("remove", "a"), writer("remove", "b")
        return verdict(
            "after lookup('a') 'a' can go as 'b' can: a lookup pins nothing",
            f"remove('a') answered {code_a} (-706: it holds a lease, 10 s by default), "
            f"remove('b') {code_b}",
            code_a == -706 and code_b == 0)
        """,
    ),
    Finding(
        name="mooncake_load_lease_ends_by_time",
        kind="design",
        what="a load's lease ends by time (10 s), not when the reader is done: an object "
             "being read becomes removable without any call",
        prop="loads-within-lease (D14)",
        options="(no verdict: no call of the suite lasts 10 s)",
        trace=("prepare_store(['a'])", "complete_store(['a'])", "prepare_load(['a'])",
               "(11 s without complete_load(['a']))"),
        rule="D4 and D14: a block with readers is never evicted until complete_load; a "
             "lease that ends by time is the spec's pin only while the load completes "
             "within it (the scheduler's obligation loads-within-lease).",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", 2 * MB16)
        writer("batch_put_session_start", ["a"], [MB16])
        writer("batch_put_session_end", ["a"])
        reader("get", "a")  # prepare_load(['a']): the reader now holds a lease
        during = writer("remove", "a")
        time.sleep(11.0)  # the load has not completed: no "done reading" call exists
        after = writer("remove", "a")
        return verdict(
            "while the load of 'a' has not completed, 'a' stays (it has a reader)",
            f"remove answered {during} during the lease and {after} 11 s later, with no "
            f"call from the reader in between: the lease ended by time",
            during == -706 and after == 0)
        """,
    ),
    Finding(
        name="mooncake_reset_skips_a_put_in_flight",
        kind="design",
        what="remove_all(force=True) skips an object still being put: it stays PENDING and "
             "blocks its key",
        prop="lookup, store-plan",
        options="--profile strict --seed 1 (no assumptions)",
        trace=("prepare_store(['a'])", "reset_cache()", "lookup('a')"),
        rule="D7: reset_cache drops every key at once, including those whose copies are "
             "still running: after it lookup('a') answers MISS and a store of 'a' stores it.",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", 2 * MB16)
        writer("batch_put_session_start", ["a"], [MB16])  # prepare_store(['a'])
        writer("remove_all", True)  # reset_cache(), forced
        size = reader("get_size", "a")  # lookup('a')
        again = writer("batch_put_session_start", ["a"], [MB16])  # prepare_store(['a'])
        writer("batch_put_session_end", ["a"])
        return verdict(
            "after the reset lookup('a') answers MISS and a new store of 'a' stores it",
            f"get_size answered {size} (-703: still being put) and a new put start {again} "
            f"(not 0: not stored again): remove_all skipped the put in flight, even forced",
            size == -703 or again != [0])
        """,
    ),
    Finding(
        name="mooncake_forced_reset_frees_a_leased_object",
        kind="design",
        what="remove_all(force=True) frees an object a reader holds a lease on, and a new "
             "put takes its room at once",
        prop="slots",
        options="--profile strict --seed 1 (no assumptions)",
        trace=("prepare_store(['a'])", "complete_store(['a'])", "prepare_load(['a'])",
               "reset_cache()", "prepare_store(['b'])"),
        rule="D7: a reset drops the key of a block being read, but its slot stays held "
             "until the load completes (a new store must not take memory a copy still "
             "reads).",
        body="""
        writer, reader = Client("writer"), Client("reader")
        writer("allocate_and_mount_segment", MB16)  # a tier of 1 slot
        writer("batch_put_session_start", ["a"], [MB16])
        writer("batch_put_session_end", ["a"])
        reader("get", "a")  # prepare_load(['a']): the reader holds a lease on 'a'
        removed = writer("remove_all", True)  # reset_cache(), forced (the adapter's choice)
        code = writer("batch_put_session_start", ["b"], [MB16])  # prepare_store(['b'])
        writer("batch_put_session_end", ["b"])
        return verdict(
            "prepare_store(['b']) on the 1-slot tier is rejected: the slot is still read",
            f"remove_all(True) removed {removed} object(s) under the lease, and the put of "
            f"'b' answered {code}: it took the room the load of 'a' was reading",
            removed == 1 and code == [0])
        """,
    ),
    Finding(
        name="mooncake_dead_holders_put_stays_open",
        kind="design",
        what="after the holder of a segment is killed, its put in flight stays open: "
             "get_size answers -703 and a new put of the key -705",
        prop="lookup, store-plan",
        options="--fault holder-kill --profile strict --assume no-reset-in-flight --seed 1",
        trace=("prepare_store(['e', 'b'])", "fail_node()", "prepare_store(['b', 'd'])"),
        rule="D15: a node's failure loses every block, STORING too: after it every lookup "
             "answers MISS and the lost keys can be stored again.",
        body="""
        holder, reader = Client("holder"), Client("reader")
        holder("allocate_and_mount_segment", 2 * MB16)
        holder("batch_put_session_start", ["e", "b"], [MB16, MB16])  # prepare_store
        holder.kill()  # fail_node(): the holder of the segment dies
        replacement = Client("replacement")
        replacement("allocate_and_mount_segment", 2 * MB16)
        size = reader("get_size", "b")  # lookup('b')
        codes = replacement("batch_put_session_start", ["b", "d"], [MB16, MB16])
        return verdict(
            "after the failure lookup('b') answers MISS and prepare_store(['b', 'd']) "
            "stores both",
            f"get_size answered {size} (-703: still being put, by a dead process) and the "
            f"new puts {codes} (-705: already exists): the lost key cannot be stored again",
            size == -703 or codes[0] != 0)
        """,
    ),
    Finding(
        name="mooncake_dead_holders_segment_still_counted",
        kind="bug",
        what="after the holder of a segment is killed, the master still counts its "
             "segment: a replacement of one slot takes two objects and evicts nothing",
        prop="eviction-choice",
        options="--fault holder-kill --profile strict --assume no-reset-in-flight --seed 1",
        trace=("fail_node()", "prepare_store(['a'])", "complete_store(['a'])",
               "prepare_store(['e', 'e'])"),
        rule="D15 and D3: the failure frees the failed node's slots with its blocks; "
             "the tier is the live segment alone, so a second store on 1 slot must evict "
             "exactly one block.",
        body="""
        holder, reader = Client("holder"), Client("reader")
        holder("allocate_and_mount_segment", MB16)  # the tier: 1 slot
        holder.kill()  # fail_node()
        replacement = Client("replacement")
        replacement("allocate_and_mount_segment", MB16)  # the tier again: 1 slot
        replacement("batch_put_session_start", ["a"], [MB16])
        replacement("batch_put_session_end", ["a"])
        # A lookup of 'a' grants a lease, so the master's background eviction cannot
        # take 'a' now, and a put never evicts: with the live segment alone full, the
        # next put can only be refused (-200). Accepted, it is placed in the dead one.
        reader("is_exist", "a")
        code = replacement("batch_put_session_start", ["e"], [MB16])  # prepare_store(['e'])
        replacement("batch_put_session_end", ["e"])
        there = reader("batch_is_exist", ["a", "e"])
        return verdict(
            "on the tier of 1 slot, prepare_store(['e']) evicts 'a' (exactly one block)",
            f"the put of 'e' answered {code} and evicted nothing: batch_is_exist "
            f"{there}, two objects on one slot of live memory: the dead segment counts",
            code == [0] and there == [1, 1])
        """,
    ),
    Finding(
        name="mooncake_block_stored_after_failure_lost",
        kind="bug",
        what="after the holder of a segment is killed, a put the master accepts can be "
             "placed in the dead segment: reported stored, sized by get_size, never readable",
        prop="misuse",
        options="--fault holder-kill --profile strict --assume no-reset-in-flight --seed 1",
        trace=("fail_node()", "prepare_store(['c'])", "lookup('c')", "complete_store(['c'])",
               "lookup('c')", "prepare_load(['c'])"),
        rule="D15: the failure loses the blocks it held and nothing else: a block stored "
             "after it stays as any block does, so its load is legal and must be accepted.",
        body="""
        holder, reader = Client("holder"), Client("reader")
        holder("allocate_and_mount_segment", MB16)  # the tier: 1 slot
        holder.kill()  # fail_node()
        replacement = Client("replacement")
        replacement("allocate_and_mount_segment", MB16)  # the tier again: 1 slot
        for key in ("n1", "n2"):  # two stores, as the adapter makes them: put sessions
            replacement("batch_put_session_start", [key], [MB16])
            replacement("batch_put_session_end", [key])
        sizes = [reader("get_size", key) for key in ("n1", "n2")]
        reads = [reader("get", key) for key in ("n1", "n2")]
        lost = [k for k, s, r in zip(("n1", "n2"), sizes, reads)
                if s == MB16 and r["bytes"] == 0]
        return verdict(
            "each block stored after the failure loads (16 MiB)",
            f"get_size answered {sizes}, and a get reads {[show(r) for r in reads]}: "
            f"{lost} stored after the failure, reported present, and lost",
            bool(lost))
        """,
    ),
    Finding(
        name="mooncake_is_exist_hit_for_a_lost_block",
        kind="design",
        what="after the holder of a segment is killed, is_exist answers 1 for its READY "
             "objects until the master notices, while a get reads nothing",
        prop="lookup",
        options="--fault holder-kill --profile safe --assume no-reset-in-flight --seed 1",
        trace=("prepare_store(['b'])", "complete_store(['b'])", "prepare_load(['b'])",
               "fail_node()", "lookup('b')"),
        rule="D15 and D1: the failure loses every block, READY and being read alike; "
             "after it no lookup may answer HIT (under either profile).",
        body="""
        holder, reader = Client("holder"), Client("reader")
        holder("allocate_and_mount_segment", 2 * MB16)
        holder("put", "b", value("b", MB16))  # prepare_store, complete_store
        reader("get", "b")  # prepare_load(['b'])
        holder.kill()  # fail_node()
        killed = time.monotonic()
        exists, got = reader("is_exist", "b"), reader("get", "b")  # lookup('b'), a load
        while time.monotonic() - killed < 30 and reader("is_exist", "b") == 1:
            time.sleep(1.0)
        print(f"is_exist answered 1 for {time.monotonic() - killed:.1f} s after the kill")
        return verdict(
            "after the failure lookup('b') answers MISS",
            f"is_exist answered {exists} while a get read {show(got)}: a HIT for a block "
            f"no load can read",
            exists == 1 and got["bytes"] == 0)
        """,
    ),
]

BY_NAME = {f.name: f for f in FINDINGS}


def write(finding: Finding) -> Path:
    path = FOLDER / f"{finding.name}.py"
    path.write_text(script(finding), encoding="utf-8")
    return path


def run(finding: Finding) -> dict[str, object]:
    """Run one written script alone (a fresh interpreter, no PYTHONPATH: kvoffload is
    not importable), keep what it printed, and return its index entry."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(FOLDER / f"{finding.name}.py")], cwd=FOLDER,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    (FOLDER / f"{finding.name}.out").write_text(done.stdout, encoding="utf-8")
    lines = done.stdout.strip().splitlines()
    return {"target": TARGET, "kind": finding.kind, "what": finding.what,
            "property": finding.prop, "status": done.returncode,
            "trace": list(finding.trace), "last_line": lines[-1] if lines else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--run", action="store_true",
                        help="run each script, writing <name>.out and index.json")
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), default=None)
    args = parser.parse_args(argv)
    chosen = [BY_NAME[n] for n in args.only] if args.only else FINDINGS
    for finding in chosen:
        write(finding)
    if not args.run:
        return 0
    index_path = FOLDER / "index.json"
    index = json.loads(index_path.read_text())
    failed = []
    for finding in chosen:
        print(f"{finding.name} ...", file=sys.stderr, flush=True)
        entry = run(finding)
        index[finding.name] = entry
        print(f"  exit {entry['status']}: {entry['last_line']}", file=sys.stderr, flush=True)
        if entry["status"] != 1:
            failed.append(finding.name)
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
