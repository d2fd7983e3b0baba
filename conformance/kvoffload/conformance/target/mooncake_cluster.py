"""A real Mooncake Store (master + two clients) inside a network namespace of its own.

``python -m kvoffload.conformance.target.mooncake_cluster --supervise`` is the *supervisor*: it
moves itself into a new network namespace (``unshare(CLONE_NEWNET)``; where that needs
a user namespace, as for a user that is not root, ``CLONE_NEWUSER`` with it), brings its
loopback interface up, checks that loopback is the only interface there, and starts as
its children, in that namespace:

- ``mooncake_master`` (the wheel's binary), every listener asked for 127.0.0.1 and the
  HTTP metadata server off (the clients use ``P2PHANDSHAKE``);
- the *writer* client (``--client writer``): contributes the memory segment that holds
  every object (it is the holder) and makes the puts;
- the *reader* client (``--client reader``): contributes no memory and makes the lookups
  and loads, so what is judged is what a request scheduled on another node sees.

Mooncake listens beyond loopback whatever it is asked (the transfer engine's RPC and
handshake sockets bind ``0.0.0.0``); inside the namespace there is nothing but loopback
to listen on, so no byte can leave the machine. The ports are fixed (the namespace is
the run's own: nothing else can hold them).

The supervisor speaks JSON lines on its standard input and output: each request names
a process (``writer``, ``reader``, or ``admin``: a GET on the master's HTTP admin server)
and an operation; the answer is ``{"ok": value}`` or ``{"error": text}``. A request to
``fault`` is a fault the suite injects (``--fault``, docs/spec.md D15): ``holder-kill``
SIGKILLs the writer (the holder of the segment) and starts a new one; ``master-kill``
SIGKILLs the master and starts a new one, then replaces both clients (a client of the
dead master holds a segment the new one does not know); ``restart`` does what
``master-kill`` does, between examples: a master that saw a holder die keeps its
segment for a while, and the next example must not inherit it. The answer names the
new pids.

**Lifetime.** The supervisor leads a process group of its own; its children are in it.
:meth:`Cluster.stop` kills that group. Every process of the cluster also asks the
kernel to kill it when its parent ends (``PR_SET_PDEATHSIG``), so when the process that
started the supervisor dies however it dies (the suite's host, killed by its lifeline),
the supervisor dies, and with it the master and both clients. An ``atexit`` handler
stops every cluster still running when the starting process exits normally.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
import weakref
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

# A client (``--client``) imports this module and Mooncake's store and nothing more:
# what only the supervisor and the starting process use (subprocess, socket, pathlib,
# shlex, ctypes.util, which brings in shutil and tempfile) is imported in the functions
# that use it, about a quarter of a client's start-up (30 to 50 ms of CPU; the tier
# starts about 28 clients).

OBJECT_BYTES = 16 << 20
"""One block: a 16 MiB object. Mooncake rounds every segment up to a multiple of 16 MiB
and its allocator fits exactly N objects of 16 MiB in a segment of N x 16 MiB (smaller
objects do not tile exactly: 3 objects of 16/3 MiB do not fit in 16 MiB)."""
MASTER_RPC_PORT = 50051
ADMIN_PORT = 9003
"""The master's HTTP metrics/admin server (``/get_all_keys``, ``/query_key``, ...)."""
START_TIMEOUT_S = 30.0
TAG_VARIABLE = "KVOFFLOAD_MOONCAKE_TAG"
"""Set in the environment of every process of a cluster (to the value the starter gave,
else a fresh one), so a test can find any process a run left behind."""
MASTER_FLAGS = (
    f"--rpc_port={MASTER_RPC_PORT}", "--rpc_address=127.0.0.1",
    "--metrics_host=127.0.0.1", f"--metrics_port={ADMIN_PORT}",
    "--enable_http_metadata_server=false",
    "--logtostderr=false", "--minloglevel=2",
)
"""The master's flags: addresses only; every store setting is Mooncake's default
(leases of 10 s, eviction from 90 % full, 5 % evicted at a time)."""
FLAGS_VARIABLE = "KVOFFLOAD_MOONCAKE_MASTER_FLAGS"
"""More flags for the master, split as a shell would (e.g.
``--eviction_high_watermark_ratio=1.0``: no background eviction before the segment is
full); the report's adapter line names them."""
CLIENT_ENV = {"MC_TCP_BIND_ADDRESS": "127.0.0.1", "MC_LOG_LEVEL": "ERROR",
              "GLOG_minloglevel": "2"}
"""``MC_TCP_BIND_ADDRESS``: with the master's HTTP metadata the transfer engine looks
for a LAN address and, finding only loopback, fails ("not valid LAN address found")
unless this is set; with ``P2PHANDSHAKE`` it is not needed, and is set anyway."""

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


class ClusterError(RuntimeError):
    """The cluster could not be started, or a process of it stopped answering."""


def _libc() -> Any:
    """The C library: glibc's by its soname, without ``ctypes.util.find_library`` (which
    runs ``ldconfig -p`` to give that same name); elsewhere as that function finds it."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        from ctypes.util import find_library

        return ctypes.CDLL(find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent ends; end now if the
    parent is already gone (it may have ended before the request)."""
    parent = os.getppid()
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise ClusterError(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}")
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def _lead_group_and_die_with_parent() -> None:
    """The supervisor's start: a process group of its own (which its children join),
    and death with the process that started it."""
    os.setpgid(0, 0)
    die_with_parent()


def new_network_namespace() -> str:
    """Move this (single-threaded) process into a new network namespace; how it was
    done. Root may create one directly; anyone else needs a user namespace with it, in
    which the caller is root (a map of its own uid and gid)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNET) == 0:
        return "unshare(CLONE_NEWNET)"
    first = os.strerror(ctypes.get_errno())
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        raise ClusterError(f"cannot create a network namespace: unshare(CLONE_NEWNET) "
                           f"failed ({first}), and with CLONE_NEWUSER too "
                           f"({os.strerror(ctypes.get_errno())})")
    from pathlib import Path

    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    return "unshare(CLONE_NEWUSER | CLONE_NEWNET)"


def interfaces() -> list[str]:
    """The network interfaces of this process's namespace (``/proc/self/net/dev``)."""
    with open("/proc/self/net/dev") as dev:
        lines = dev.read().splitlines()[2:]
    return [line.split(":", 1)[0].strip() for line in lines if ":" in line]


def loopback_up() -> None:
    """``ip link set lo up``, with the ioctls it makes."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def master_binary() -> str:
    """The ``mooncake_master`` executable the installed wheel ships."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("mooncake")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterError("the mooncake package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "mooncake_master"
    if not path.is_file():
        raise ClusterError(f"the mooncake wheel has no master binary at {path}")
    return str(path)


def _wait_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"{what} exited with status {process.returncode} at start")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise ClusterError(f"{what} did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S} s")


# ---------------------------------------------------------------- a client process

def _operations(store: Any, address: int) -> dict[str, Callable[..., Any]]:
    """What a client does when asked, by name; ``address`` is its registered buffer."""

    def sizes(keys: list[str]) -> list[int]:
        return [OBJECT_BYTES] * len(keys)

    def load(keys: list[str]) -> dict[str, Any]:
        """A load: one get session over the keys (Mooncake queries the replicas once,
        granting the reader its lease), then each object transferred into the reader's
        registered buffer, then the session ended. A key the session cannot start on
        stops the load before any transfer."""
        started = list(store.batch_get_session_start(keys))
        if any(c != 0 for c in started):
            store.batch_get_session_end(keys)
            return {"started": started, "read": []}
        read = [int(store.get_into(k, address, OBJECT_BYTES)) for k in keys]
        store.batch_get_session_end(keys)
        return {"started": started, "read": read}

    return {
        "get_size": store.get_size,
        "is_exist": store.is_exist,
        "put_start": lambda keys: list(store.batch_put_session_start(keys, sizes(keys))),
        "put_end": lambda keys: list(store.batch_put_session_end(keys)),
        "put_revoke": lambda keys: list(store.batch_put_session_revoke(keys)),
        "load": load,
        "remove": store.remove,
        "remove_all": store.remove_all,
        "mount": lambda size: store.allocate_and_mount_segment(size),
        "unmount": lambda ids: store.unmount_and_free_segment(ids),
    }


def _client_main(role: str) -> int:
    """One Mooncake client: ``writer`` (holds the segments, puts) or ``reader``."""
    die_with_parent()
    out = os.fdopen(os.dup(1), "w")  # the channel; the library's own output goes to stderr
    os.dup2(2, 1)
    import importlib

    def say(answer: dict[str, Any]) -> None:
        out.write(json.dumps(answer) + "\n")
        out.flush()

    store: Any = importlib.import_module("mooncake.store").MooncakeDistributedStore()
    code = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 2 * OBJECT_BYTES, "tcp", "",
                       f"127.0.0.1:{MASTER_RPC_PORT}")
    if code != 0:
        say({"error": f"setup() answered {code}"})
        return 1
    buffer = ctypes.create_string_buffer(OBJECT_BYTES)
    address = ctypes.addressof(buffer)
    if role == "reader" and store.register_buffer(address, OBJECT_BYTES) != 0:
        say({"error": "register_buffer() failed"})
        return 1
    ops = _operations(store, address)
    say({"ok": os.getpid()})
    for line in sys.stdin:
        op, args = json.loads(line)
        try:
            answer = {"ok": ops[op](*args)}
        except Exception as error:  # answered, not raised: the supervisor reports it
            answer = {"error": f"{type(error).__name__}: {error}"}
        say(answer)
    return 0


# ---------------------------------------------------------------- the supervisor

class _Child:
    def __init__(self, args: list[str], env: dict[str, str], what: str) -> None:
        import subprocess

        self.what = what
        self.process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, preexec_fn=die_with_parent)

    def ask(self, op: str, args: list[Any]) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:
            raise ClusterError(f"{self.what} has no pipes")
        stdin.write((json.dumps([op, args]) + "\n").encode())
        stdin.flush()
        return self.read()

    def read(self) -> dict[str, Any]:
        stdout = self.process.stdout
        line = stdout.readline() if stdout is not None else b""
        if not line:
            raise ClusterError(f"the {self.what} client ended (status "
                               f"{self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer


def _admin(path: str) -> str:
    # Imported here, in the supervisor that asks: every host and CLI imports this module
    # through targets.py, and urllib.request's imports (http, email) are most of its cost.
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}{path}", timeout=10) as reply:
        text: str = reply.read().decode()
        return text


class _Nodes:
    """The supervisor's children: the master and the two clients, each replaceable (a
    fault the suite injects kills one and starts another)."""

    def __init__(self) -> None:
        self.env = {**os.environ, **CLIENT_ENV}
        self.master = self._master()
        self.clients = {role: self._client(role) for role in ("writer", "reader")}

    def _master(self) -> subprocess.Popen[bytes]:
        import shlex
        import subprocess

        extra = shlex.split(os.environ.get(FLAGS_VARIABLE, ""))
        master = subprocess.Popen([master_binary(), *MASTER_FLAGS, *extra],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=self.env,
                                  preexec_fn=die_with_parent)
        _wait_port(MASTER_RPC_PORT, master, "mooncake_master")
        return master

    def _client(self, role: str) -> _Child:
        # this module's own name, wherever the package puts it (run as -m, __name__ is
        # "__main__")
        module = [sys.executable, "-m", __spec__.name if __spec__ else __name__, "--client"]
        child = _Child([*module, role], self.env, role)
        hello = child.read()
        if "ok" not in hello:
            raise ClusterError(f"the {role} client: {hello['error']}")
        return child

    def pids(self) -> dict[str, int]:
        return {"master": self.master.pid,
                **{r: c.process.pid for r, c in self.clients.items()}}

    def fault(self, kind: str) -> dict[str, int]:
        """Kill a node with SIGKILL and start its replacement (D15); the new pids."""
        if kind == "holder-kill":
            _kill(self.clients["writer"].process)
            self.clients["writer"] = self._client("writer")
        elif kind in ("master-kill", "restart"):
            _kill(self.master)
            self.master = self._master()
            for role in ("writer", "reader"):
                _kill(self.clients[role].process)
                self.clients[role] = self._client(role)
        else:
            raise ClusterError(f"no such fault {kind!r}: holder-kill, master-kill or "
                               f"restart")
        return self.pids()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL one child and reap it (no zombie is left for the leak checks)."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.close()


def _supervise_main() -> int:
    die_with_parent()
    out = sys.stdout
    how = new_network_namespace()
    loopback_up()
    found = interfaces()
    if found != ["lo"]:
        out.write(json.dumps({"error": f"the new namespace has interfaces {found}, "
                                       f"not loopback alone"}) + "\n")
        out.flush()
        return 1
    try:
        nodes = _Nodes()
    except ClusterError as error:
        out.write(json.dumps({"error": str(error)}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ok": {"pids": nodes.pids(), "namespace": how,
                                 "interfaces": found}}) + "\n")
    out.flush()
    for line in sys.stdin:
        out.write(json.dumps(_answer(nodes, line)) + "\n")
        out.flush()
    return 0


def _answer(nodes: _Nodes, line: str) -> dict[str, Any]:
    """The supervisor's answer to one request line."""
    to, op, args = json.loads(line)
    try:
        if to == "admin":
            return {"ok": _admin(str(args[0]))}
        if to == "interfaces":
            return {"ok": interfaces()}
        if to == "fault":
            return {"ok": nodes.fault(op)}
        return nodes.clients[to].ask(op, args)
    except (ClusterError, OSError) as error:  # urllib's URLError is an OSError
        return {"error": f"{type(error).__name__}: {error}"}


# ---------------------------------------------------------------- the starter's side

_RUNNING: list[weakref.ref[Cluster]] = []


class Cluster:
    """A started supervisor (and so a master and two clients), seen from the process
    that started it."""

    def __init__(self, tag: str | None = None) -> None:
        self.tag = (tag or os.environ.get(TAG_VARIABLE)
                    or f"kvoffload-{os.getpid()}-{time.time_ns()}")
        env = {**os.environ, TAG_VARIABLE: self.tag}
        import subprocess

        self.process = subprocess.Popen(
            [sys.executable, "-m", "kvoffload.conformance.target.mooncake_cluster", "--supervise"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, preexec_fn=_lead_group_and_die_with_parent)
        _RUNNING.append(weakref.ref(self))
        try:
            started = self._read()
        except ClusterError:
            self.stop()
            raise
        if "ok" not in started:
            self.stop()
            raise ClusterError(f"the Mooncake cluster did not start: {started['error']}")
        self.pids: dict[str, int] = started["ok"]["pids"]
        self.namespace: str = started["ok"]["namespace"]

    def _read(self) -> dict[str, Any]:
        stdout: IO[bytes] | None = self.process.stdout
        line = stdout.readline() if stdout is not None else b""
        if not line:
            raise ClusterError(f"the Mooncake supervisor ended (status {self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, to: str, op: str, *args: Any) -> Any:
        """One operation on one process of the cluster; its value.

        raises: ClusterError (the process answered an error, or is gone)
        """
        stdin = self.process.stdin
        if stdin is None or self.process.poll() is not None:
            raise ClusterError("the Mooncake cluster is stopped")
        try:
            stdin.write((json.dumps([to, op, list(args)]) + "\n").encode())
            stdin.flush()
        except OSError as error:
            raise ClusterError(f"the Mooncake supervisor is gone: {error}") from error
        answer = self._read()
        if "error" in answer:
            raise ClusterError(f"{to}.{op}{tuple(args)!r}: {answer['error']}")
        return answer["ok"]

    def stop(self) -> None:
        """Kill the supervisor's process group (the master and both clients are in it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()


def _stop_all() -> None:
    for ref in _RUNNING:
        cluster = ref()
        if cluster is not None:
            cluster.stop()


atexit.register(_stop_all)


def tagged_processes(tag: str) -> list[int]:
    """Every process on the machine whose environment carries ``tag`` (a test's way to
    see that a run left nothing behind)."""
    from pathlib import Path

    found = []
    needle = f"{TAG_VARIABLE}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--supervise"]:
        return _supervise_main()
    if len(args) == 2 and args[0] == "--client" and args[1] in ("writer", "reader"):
        return _client_main(args[1])
    sys.stderr.write("usage: python -m kvoffload.conformance.target.mooncake_cluster "
                     "--supervise | --client writer|reader\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
