"""``mooncake==0.3.13.post1``: Mooncake Store, a real master and two real clients.

The target kind and its adapter. One cluster per process that checks (the suite's host):
a ``mooncake_master`` and two client processes, all inside a network namespace the run
creates (:mod:`.mooncake_cluster`). Each example gets a fresh tier: the writer client
mounts a segment of ``capacity`` x 16 MiB, after the previous example's segment was
emptied (``remove_all(force=True)``, every put session it left revoked) and unmounted;
keys carry the example's number, so nothing of an earlier example can answer for a
later one.

How each operation maps onto Mooncake's calls (the writer client stores; the reader
client, another process on the same master, looks up and loads):

- ``lookup`` (reader): ``--profile strict``: ``get_size``: a size is HIT, -703
  (``REPLICA_IS_NOT_READY``) PENDING, -704 (``OBJECT_NOT_FOUND``) MISS.
  ``--profile safe``: ``is_exist``: 1 is HIT, 0 MISS (it answers 0 for an object being
  written: it cannot say PENDING). Both grant the reader a lease on an object found.
- ``prepare_store`` (writer): ``batch_put_session_start`` over the call's distinct keys
  (Mooncake's PutStart: the master allocates a replica for each key, which is then
  being written). 0: stored; -705 (``OBJECT_ALREADY_EXISTS``) or -600 (a put session
  for the key is already open): already there, not stored again. -200
  (``NO_AVAILABLE_HANDLE``, no space) for any key rejects the call: the sessions this
  call opened are revoked first, so a refused store leaves nothing open (all or
  nothing). Mooncake never evicts inside a put: ``evicted`` is always empty.
- ``complete_store`` (writer): ``batch_put_session_end`` (success: PutEnd, the objects
  become readable) or ``batch_put_session_revoke`` (failure: PutRevoke, the replicas are
  freed). A key with no open session answers -600 and nothing changes (the spec
  ignores such a completion too).
- ``prepare_load`` (reader): ``batch_get_session_start`` (the replicas are queried once,
  the lease granted), each object transferred with ``get_into`` into the reader's
  registered buffer, ``batch_get_session_end``. A key the session does not start on
  refuses the call before any transfer (its lease on the others stays: a lease ends by
  time, 10 s after it was granted, never by a call).
- ``complete_load``: no call. Mooncake has no "done reading": the lease ends by time.
  The adapter refuses a completion of a key it holds no load of (the rejection).
- ``reset_cache`` (writer): ``remove_all(force=True)``. Mooncake skips objects still
  being written (their put sessions go on), so it is checked under
  ``--assume no-reset-in-flight``.
- ``touch``, ``take_events``: Mooncake has neither (not generated).
- ``fail_node`` (the fault the suite injects under ``--fault``, docs/spec.md D15; no
  call of the API): the cluster SIGKILLs the holder (``holder-kill``: the writer client,
  whose segment holds every object) or the master (``master-kill``; both clients are
  then replaced too), starts the replacement, and the writer mounts the tier's segment
  again. The adapter's own books (open put sessions, loads held, slot numbers) went with
  the node and are dropped.

The kind runs under ``--eviction background`` unless told otherwise (:data:`DEFAULTS`,
docs/spec.md D14): the master evicts READY unleased objects in a thread of its own, so
the judge takes an object gone between calls as the spec's ``evict_in_background``. A
lease is the spec's pin; one that ends by time before ``complete_load`` would break the
scheduler's obligation ``loads-within-lease`` (D14).

What is the adapter's own: slots. An object's replica address is known only once it is
readable, and the spec wants a slot at ``prepare_store``: the adapter numbers the
objects the master lists (``/get_all_keys`` on its admin server) or is writing for this
adapter, lowest free number first, as it numbers LMCache's disk chunks; a key the
put call itself found present keeps its number, even if the master stopped listing it
just after. And the bytes:
a put session transfers nothing (it is the reservation and commit around a client's
own transfer); the adapter writes none, so a load reads back what the segment held.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kvoffload.spec import Completion, Key, LookupResult

from ..adapter_api import Adapter, Capabilities, EventBatch, LoadOutcome, Reported, StoreOutcome
from ..config import CheckConfig
from ..errors import TargetLoadError, UsageError

if TYPE_CHECKING:
    from .mooncake_cluster import Cluster

# mooncake_cluster (ctypes, socket, subprocess: about 9 ms of CPU) is imported where a
# Mooncake target needs it: every Python host imports this module (through targets),
# few check Mooncake.

PREFIX = "mooncake=="
SUPPORTED = ("0.3.13.post1",)
"""Mooncake releases the adapter was written against."""
DISTRIBUTIONS = ("mooncake-transfer-engine-non-cuda", "mooncake-transfer-engine")
"""The wheels that install the ``mooncake`` package (the CPU build first)."""
DEFAULTS: dict[str, tuple[object, str]] = {
    "eviction": ("background", "Mooncake's master evicts READY unleased objects in a thread "
                 "of its own, between calls (docs/spec.md D14)"),
}
"""Options a ``mooncake==`` target sets when the user gives none."""

OK = 0
NO_SPACE = -200
INVALID_PARAMS = -600
NOT_READY = -703
NOT_FOUND = -704
ALREADY_EXISTS = -705


class Refused(Exception):
    """The adapter declines a call Mooncake refused (a load of an object it cannot
    start a session on) or cannot express (a completion of a load never made)."""


class MooncakeError(RuntimeError):
    """Mooncake answered a code the mapping has no meaning for (a crash)."""


def is_mooncake_target(text: str) -> bool:
    return text.startswith(PREFIX)


def installed_version() -> str | None:
    import importlib.metadata  # here: every host imports this module, few ask this

    for name in DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_version(text: str) -> str:
    wanted = text.removeprefix(PREFIX)
    if wanted not in SUPPORTED:
        raise TargetLoadError(f"TARGET {text!r}: the Mooncake adapter was written against "
                              f"{list(SUPPORTED)}; {wanted!r} is not one of them")
    have = installed_version()
    if have is None:
        raise TargetLoadError(
            f"TARGET {text!r}: Mooncake is not installed; install it with pip install -e "
            f"'.[mooncake]' (mooncake-transfer-engine-non-cuda=={SUPPORTED[-1]}; it needs "
            f"libibverbs.so.1: apt-get install libibverbs1)")
    if have != wanted:
        raise TargetLoadError(f"TARGET {text!r}: the installed Mooncake is {have}, not "
                              f"{wanted}")
    return wanted


class _Shared:
    """The one cluster of this process, started by the first adapter."""

    cluster: Cluster | None = None
    tiers = itertools.count(1)
    current: MooncakeAdapter | None = None
    failed = False
    """A node failed since the cluster was last fresh: the master may still hold the
    dead holder's segment and objects (about 10 s), so the next tier starts on a
    restarted master and clients, as if no example had run before (a shrunk trace
    without the fault must not fail through an earlier example's)."""


def _cluster() -> Cluster:
    from .mooncake_cluster import Cluster, ClusterError

    if _Shared.cluster is None or _Shared.cluster.process.poll() is not None:
        try:
            _Shared.cluster = Cluster()
        except (ClusterError, OSError) as error:
            raise TargetLoadError(f"starting Mooncake (master and two clients in a network "
                                  f"namespace of their own) failed: {error}") from error
    return _Shared.cluster


class MooncakeAdapter:
    """One tier of ``capacity`` 16 MiB objects on the shared cluster."""

    name = "mooncake"

    def __init__(self, capacity: int, strict: bool, fault: str = "none") -> None:
        self.cluster = _cluster()
        self.capacity = capacity
        self.fault = fault
        """The node :meth:`fail_node` kills (``--fault``): ``holder-kill``,
        ``master-kill``, or ``none``."""
        self.engine_calls: list[str] = []
        """Every Mooncake call this adapter made, in order (``writer.put_start(...)``,
        ``admin./get_all_keys``): what an operation became in Mooncake's terms."""
        self.strict = strict
        previous = _Shared.current
        if previous is not None:
            previous.close()
        self.tier = next(_Shared.tiers)
        if _Shared.failed:
            self.ask("fault", "restart")
            _Shared.failed = False
        self.storing: set[Key] = set()
        """Keys whose put session this adapter opened and has not ended or revoked."""
        self.slot: dict[Key, int] = {}
        self.reads: dict[Key, int] = {}
        """Loads made and not yet completed, per key."""
        self.segments: list[str] = self._mount()
        self.capabilities = Capabilities(touch=False, reset=True, events=False,
                                         completion_tickets=False, typed_misuse=False,
                                         strict_lookup=strict)
        _Shared.current = self

    def _mount(self) -> list[str]:
        """The writer mounts this tier's segment; its ids."""
        from .mooncake_cluster import OBJECT_BYTES

        mounted = self.ask("writer", "mount", self.capacity * OBJECT_BYTES)
        if not isinstance(mounted, dict) or mounted.get("ret") != 0:
            raise TargetLoadError(f"the writer could not mount a segment of "
                                  f"{self.capacity} objects: {mounted!r}")
        return list(mounted["segment_ids"])

    def fail_node(self) -> None:
        """The fault the suite injects (``--fault``, D15): the cluster kills the holder
        or the master with SIGKILL and starts its replacement; the tier's segment is
        mounted again on the writer, and the adapter's books, which died with the node,
        are dropped."""
        if self.fault == "none":
            raise Refused("no node to fail: the run asked for no fault (--fault)")
        _Shared.failed = True
        self.ask("fault", self.fault)
        self.storing.clear()
        self.reads.clear()
        self.slot.clear()
        self.segments = self._mount()

    def close(self) -> None:
        """Revoke this tier's open put sessions, remove its objects and unmount it."""
        if self.storing:
            names = [self._name(k) for k in sorted(self.storing, key=repr)]
            self.ask("writer", "put_revoke", names)
            self.storing.clear()
        self.ask("writer", "remove_all", True)
        self.ask("writer", "unmount", self.segments)
        if _Shared.current is self:
            _Shared.current = None

    def ask(self, to: str, op: str, *args: object) -> Any:
        """One call on one process of the cluster, recorded in :attr:`engine_calls`."""
        self.engine_calls.append(f"{to}.{op or args[0]}{args if op else ''}")
        return self.cluster.ask(to, op, *args)

    def _name(self, key: Key) -> str:
        return f"t{self.tier}/{key}"

    def lookup(self, key: Key) -> Reported:
        if self.strict:
            code = self.ask("reader", "get_size", self._name(key))
            if isinstance(code, int) and code >= 0:
                return LookupResult.HIT
            if code == NOT_READY:
                return LookupResult.PENDING
            if code == NOT_FOUND:
                return LookupResult.MISS
            raise MooncakeError(f"get_size({self._name(key)!r}) answered {code!r}")
        code = self.ask("reader", "is_exist", self._name(key))
        if code == 1:
            return LookupResult.HIT
        if code == 0:
            return LookupResult.MISS
        raise MooncakeError(f"is_exist({self._name(key)!r}) answered {code!r}")

    def _listed(self) -> set[Key]:
        """The keys of this tier the master lists (readable objects)."""
        text = str(self.ask("admin", "", "/get_all_keys"))
        prefix = f"t{self.tier}/"
        return {line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)}

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        distinct = list(dict.fromkeys(keys))
        codes = self.ask("writer", "put_start", [self._name(k) for k in distinct])
        if not isinstance(codes, list) or len(codes) != len(distinct):
            raise MooncakeError(f"batch_put_session_start answered {codes!r}")
        opened = [k for k, c in zip(distinct, codes, strict=True) if c == OK]
        odd = [(k, c) for k, c in zip(distinct, codes, strict=True)
               if c not in (OK, ALREADY_EXISTS, INVALID_PARAMS, NO_SPACE)]
        if odd or NO_SPACE in codes:
            if opened:  # all or nothing: what this call opened is revoked
                self.ask("writer", "put_revoke", [self._name(k) for k in opened])
            if odd:
                raise MooncakeError(f"batch_put_session_start answered {odd!r}")
            return StoreOutcome(False)
        present = {k for k, c in zip(distinct, codes, strict=True) if c == ALREADY_EXISTS}
        # A key this call found present keeps its number even if the master stops
        # listing it before the listing below (evicted just after the put, in the
        # background): the call saw it, so the call hands out nothing of its.
        held = {self.slot[k] for k in (self._listed() | self.storing | present)
                if k in self.slot}
        free = (n for n in itertools.count() if n not in held)
        slots = []
        for key in opened:
            self.slot[key] = next(free)
            slots.append(self.slot[key])
            self.storing.add(key)
        return StoreOutcome(True, tuple(opened), tuple(slots), ())

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None:
        distinct = list(dict.fromkeys(keys))
        codes = self.ask("writer", "put_end" if success else "put_revoke",
                         [self._name(k) for k in distinct])
        if not isinstance(codes, list) or len(codes) != len(distinct):
            raise MooncakeError(f"the put session's end answered {codes!r}")
        for key, code in zip(distinct, codes, strict=True):
            if code == OK:
                self.storing.discard(key)
            elif code != INVALID_PARAMS:  # -600: no session open for the key: ignored
                raise MooncakeError(f"ending the put session of {key!r} answered {code}")
        return None

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        distinct = list(dict.fromkeys(keys))
        answer = self.ask("reader", "load", [self._name(k) for k in distinct])
        if not isinstance(answer, dict):
            raise MooncakeError(f"the load answered {answer!r}")
        started, read = answer["started"], answer["read"]
        refused = [(k, c) for k, c in zip(distinct, started, strict=True) if c != OK]
        if refused:
            raise Refused(f"batch_get_session_start answered {refused[0][1]} for "
                          f"{refused[0][0]!r}: the object cannot be read")
        short = [(k, n) for k, n in zip(distinct, read, strict=True) if n < 0]
        if short:  # the object cannot be read after all (its holder is gone): refused
            raise Refused(f"get_into({short[0][0]!r}) answered {short[0][1]} after its get "
                          f"session started: the object cannot be read")
        for key in distinct:
            self.reads[key] = self.reads.get(key, 0) + 1
        return LoadOutcome(None, tuple(self.slot.get(k, -1) for k in keys))

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None:
        distinct = list(dict.fromkeys(keys))
        missing = [k for k in distinct if not self.reads.get(k)]
        if missing:
            raise Refused(f"no load of {missing[0]!r} is held: Mooncake has no call that "
                          f"ends a read (its lease ends by time), so there is nothing to end")
        for key in distinct:
            self.reads[key] -= 1
        return None

    def touch(self, keys: Sequence[Key]) -> None:
        raise Refused("Mooncake has no touch")

    def reset_cache(self) -> int | None:
        self.ask("writer", "remove_all", True)
        return None

    def take_events(self) -> EventBatch:
        raise Refused("Mooncake's master publishes no events to a subscriber here")

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, Refused)


def mooncake_factory(
    text: str, config: CheckConfig
) -> tuple[str, str, Callable[[int], Adapter]]:
    """(adapter name, why, a function building one tier of a given capacity)."""
    check_version(text)
    if config.adapter not in ("auto", "mooncake"):
        raise UsageError(f"a Mooncake target is driven by its own adapter (--adapter auto), "
                         f"not {config.adapter!r}")
    if config.policy.value != "lru":
        raise UsageError("Mooncake evicts in the background, by lease expiry and "
                         "watermark, not by a policy the spec models: check it with "
                         "--policy lru (and --level any)")
    from .mooncake_cluster import FLAGS_VARIABLE

    strict = config.profile.value == "strict"
    flags = os.environ.get(FLAGS_VARIABLE, "").strip()
    why = ("Mooncake target: a master and two clients in a network namespace of their "
           f"own; lookup through {'get_size' if strict else 'is_exist'} "
           f"(--profile {config.profile.value})"
           + (f"; master flags from {FLAGS_VARIABLE}: {flags}" if flags else ""))
    if config.injects_faults:
        why += (f"; --fault {config.fault}: the "
                f"{'writer client (the holder)' if config.fault == 'holder-kill' else 'master'}"
                f" is killed with SIGKILL at fail_node and replaced")
    return "mooncake", why, lambda capacity: MooncakeAdapter(capacity, strict, config.fault)
