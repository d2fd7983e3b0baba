"""``OffloadManager`` behind vLLM's ``OffloadingManager`` method names and signatures.

``VllmFacade`` can stand in for vLLM's ``CPUOffloadingManager`` (see
``docs/vendoring.md``): the same constructor arguments (``num_blocks`` or 0.34's
``num_chunks``, ``cache_policy``, ``enable_events``, ``store_threshold``,
``max_tracker_size``, 0.34's ``info``; ``cache_policy_module_path`` only as None), the
same methods, vLLM-shaped outputs. ``lookup`` answers in the flavour of the vLLM it
runs in: ``True`` / ``False`` / ``None`` (0.19 to 0.24) or ``LookupResult.HIT`` /
``MISS`` / ``HIT_PENDING`` (0.25 on; never ``RETRY``, since the manager always knows).
Inside vLLM (or with a release's types) the facade is an instance of the release's
``OffloadingManager``.

What the facade adds to the manager, as vLLM's manager does it:

* **0 slots** (vLLM's ``num_blocks`` is 0 when the CPU budget is under one block):
  accepted; every store that needs a slot is rejected (``None``), nothing is ever
  stored. ``OffloadManager`` itself keeps requiring one slot; here it gets one it never
  hands out.
* **store_threshold** with the release's meaning (``VllmTypes.threshold_counts``):
  up to 0.25, a key is stored only once ``lookup`` has seen it ``store_threshold``
  times, counted in a tracker of the ``max_tracker_size`` most recently looked-up keys
  (so this lookup changes state, as vLLM's does; ``OffloadManager.lookup`` stays pure);
  0.34 counts offers to ``prepare_store`` instead, once per request.
* **Events in vLLM's form**: one ``removed`` event per store that evicted, one
  ``stored`` event per completion that made blocks READY, in the order they happened
  (0.34: stored events expect a removal, a failed store is a metadata-only removal);
  a reset emits one ``removed`` event for the READY blocks it drops (vLLM's emits
  none: there the facade follows the spec). The native net change of the READY set
  stays ``OffloadManager.take_events``; the facade's own manager keeps it off
  (``net_events=False``), since nothing reads it there.
* **get_stats()**: the release's stats object with the CPU cache-usage gauge (the
  fraction of slots held by stores in flight and blocks being read) and, with a
  threshold, the stores skipped since the last call.

Where vLLM differs from the spec, the facade follows the spec: duplicate keys take
one slot; a precondition broken (a load of a block that is not READY, an unmatched
``complete_load``) raises a typed :class:`~kvoffload.spec.errors.MisuseError`
instead of an ``assert``; a reset holds the slots of copies still running.

Reset inside vLLM: vLLM's scheduler never passes on completions of jobs from before
a reset (its workers flush them), so the slots of copies a reset left running are
freed when vLLM says they are done: at ``on_reset_flushed()`` where vLLM has that hook
(0.34 on), else at the reset itself, as vLLM's own manager does
(``VllmTypes.orphans_released``). Outside vLLM they are freed by their completions.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from kvoffload.spec.errors import BadCapacity
from kvoffload.spec.outputs import StoreRejected
from kvoffload.spec.vocabulary import Key, LookupResult, Policy

from .manager import OffloadManager
from .vllm_types import ReqContext, VllmTypes

__all__ = ["ReqContext", "UnsupportedArgument", "VllmFacade"]

if TYPE_CHECKING:
    # Where vLLM is installed, type checkers see the facade as vLLM's OffloadingManager
    # (so `self._manager = VllmFacade(...)` in an offloading spec type-checks); at run
    # time VllmFacade.__new__ makes that true by subclassing the release's base class.
    from vllm.v1.kv_offload.base import (  # type: ignore[import-not-found, unused-ignore]  # vLLM is optional
        OffloadingManager as _VllmOffloadingManager,
    )
else:
    _VllmOffloadingManager = object


class UnsupportedArgument(ValueError):
    """A vLLM constructor argument the facade cannot honour with the release's meaning.

    Refused loudly rather than dropped: vLLM's manager would behave differently.
    """


class VllmFacade(_VllmOffloadingManager):  # type: ignore[misc, unused-ignore]  # Any base without vLLM
    """vLLM's ``OffloadingManager`` API over an :class:`OffloadManager`.

    ``types`` chooses the output classes (and so the lookup flavour, the event form,
    the stats object and the meaning of ``store_threshold``): by default vLLM's own
    when vLLM is importable, else the stand-ins with the enum flavour.
    ``req_context`` arguments are accepted; the spec's manager needs none, and the
    facade reads them only for 0.34 (the per-request record of counted offers, and the
    context a stored event carries). vLLM passes every constructor argument by keyword;
    positionally the order is 0.24's.

    raises: BadCapacity, UnknownPolicy, UnsupportedArgument
    """

    def __init__(
        self,
        num_blocks: int | None = None,
        cache_policy: str | Policy = "lru",
        enable_events: bool = False,
        store_threshold: int = 1,
        max_tracker_size: int = 64_000,
        *,
        num_chunks: int | None = None,
        cache_policy_module_path: str | None = None,
        info: Any = None,
        types: VllmTypes | None = None,
    ) -> None:
        self.types = types = types or VllmTypes.from_vllm() or VllmTypes.stand_ins()
        base = types.offloading_manager or _installed_base()
        if base is not None and not isinstance(self, base):
            self.__class__ = _subclass(type(self), base)
        slots = _slots(num_blocks, num_chunks)
        if cache_policy_module_path is not None:
            raise UnsupportedArgument(
                f"cache_policy_module_path={cache_policy_module_path!r}: the facade runs the "
                f"spec's LRU or ARC only, not an out-of-tree vLLM CachePolicy")
        counting = store_threshold >= 2
        if counting and max_tracker_size < 1:
            raise UnsupportedArgument(
                f"max_tracker_size={max_tracker_size}: a store_threshold needs a tracker of "
                f"at least one key")
        self.num_slots = slots
        self.manager = OffloadManager(max(slots, 1), policy=cache_policy, net_events=False)
        """The native manager, with its net-change events off (the facade speaks vLLM's)."""
        self.enable_events = enable_events
        self.medium = types.medium
        self.store_threshold = store_threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[Key, int] | None = OrderedDict() if counting else None
        """Lookups (offers in 0.34) per key while ``store_threshold`` >= 2 (vLLM's
        public ``counts``), least recent first."""
        self._offers = counting and types.threshold_counts == "offers"
        self._generation = 0
        """Resets so far: a request's record of counted offers is from one generation."""
        self.stores_skipped_in_current_batch = 0
        self._config_info: Mapping[str, Any] = (
            info.as_config_info() if info is not None else {})
        self._events: list[Any] | None = [] if enable_events else None
        self._make_event = types.offloading_event
        self._no_slots = slots == 0
        enum = types.lookup_result
        answers: tuple[Any, Any, Any] = ((True, None, False) if enum is None else
                                         (enum["HIT"], enum["HIT_PENDING"], enum["MISS"]))
        plain = self.manager.lookup_function(*answers)
        # The scheduler calls lookup once per block: this instance's lookup is the
        # manager's own, answering in vLLM's values directly (same behaviour as below).
        self.__dict__["lookup"] = (
            plain if self.counts is None or self._offers else self._counting(plain))
        self._answers = dict(zip((LookupResult.HIT, LookupResult.PENDING, LookupResult.MISS),
                                 answers, strict=True))
        self._spec = types.load_store_spec
        self._output = types.prepare_store_output

    def _counting(self, plain: Callable[..., Any]) -> Callable[..., Any]:
        """``lookup`` that first counts the key, as vLLM's does with a threshold."""
        count = self._count

        def lookup(key: Key, req_context: object = None) -> Any:
            count(key)
            return plain(key)
        return lookup

    def _count(self, key: Key) -> None:
        """One more lookup of ``key`` in the tracker (the oldest key leaves when full)."""
        counts = self.counts
        if counts is None or self._offers:
            return
        if key in counts:
            counts.move_to_end(key)
            counts[key] += 1
        else:
            if len(counts) >= self.max_tracker_size:
                counts.popitem(last=False)
            counts[key] = 1

    # --- the scheduler's calls ----------------------------------------------------

    def lookup(self, key: Key, req_context: object = None) -> Any:
        """HIT / MISS / HIT_PENDING (0.25 on), or True / False / None (0.19 to 0.24).

        With ``store_threshold`` >= 2 (lookup counting) the key is counted first."""
        self._count(key)
        return self._answers[self.manager.lookup(key)]

    def prepare_load(self, keys: Collection[Key], req_context: object = None) -> Any:
        """Pin the blocks; returns a ``CPULoadStoreSpec`` of their host slots.

        raises: NotReadable
        """
        plan = self.manager.prepare_load(keys)
        slots = plan.slots
        if len(slots) != len(keys):  # duplicates: vLLM pairs block_ids[i] with keys[i]
            slot_of = dict(zip(plan.keys, slots, strict=True))
            return self._spec([slot_of[k] for k in keys])
        return self._spec(list(slots))

    def touch(self, keys: Collection[Key], req_context: object = None) -> None:
        self.manager.touch(keys)

    def complete_load(self, keys: Collection[Key], req_context: object = None) -> None:
        """raises: UnmatchedCompleteLoad"""
        self.manager.complete_load(keys)

    def prepare_store(self, keys: Collection[Key], req_context: object = None) -> Any:
        """A ``PrepareStoreOutput`` (keys to store, their slots, evicted keys), or None
        when the call cannot fit (nothing changes then)."""
        counts = self.counts
        if counts is not None:
            if self._offers:
                keys = self._admit_offers(list(keys), req_context)
            else:
                offered = len(keys)
                threshold = self.store_threshold
                keys = [k for k in keys if counts.get(k, 0) >= threshold]
                self.stores_skipped_in_current_batch += offered - len(keys)
        if self._no_slots and len(keys):
            return None  # nothing is ever stored in 0 slots, so every key needs one
        plan = self.manager.prepare_store(keys)
        if isinstance(plan, StoreRejected):
            return None
        new, evicted = plan.keys, plan.evicted
        if evicted:
            events = self._events
            if events is not None:  # vLLM's field order: keys, medium, removed
                events.append(self._make_event(list(evicted), self.medium, True))
        return self._output(list(new), self._spec(list(plan.slots)), list(evicted))

    def _admit_offers(self, keys: list[Key], req_context: object) -> list[Key]:
        """0.34's threshold: count this offer, keep the absent keys offered often enough.

        Each key counts once per request (a retry or a re-offer is not another use), so
        the request remembers the keys it counted (on vLLM's ``ReqContext`` state; with
        no such context every offer counts). Keys already tracked move to the recent
        end and, unless this request counted them, count one more (a key twice in the
        call, twice); new keys enter with one, pushing out the least recent key not
        offered now, or staying untracked when every tracked key is offered now.
        Absent keys under the threshold are skipped, and reported as skipped once per
        request. Keys present (STORING or READY) are not filtered.
        """
        counts = self.counts
        if counts is None:
            return keys
        counted = self._counted_by(req_context)
        already: set[Key] = counted if counted is not None else set()
        protected: set[Key] = set()
        for key in keys:
            if key in counts:
                counts.move_to_end(key)
                if key not in already:
                    counts[key] += 1
                protected.add(key)
        room = len(counts) - len(protected)
        for key in keys:
            if key in counts:
                continue
            if len(counts) >= self.max_tracker_size:
                if room == 0:
                    continue
                counts.popitem(last=False)
                room -= 1
            counts[key] = 1
        lookup, threshold = self.manager.lookup, self.store_threshold
        admitted = []
        for key in keys:
            if lookup(key) is not LookupResult.MISS or counts.get(key, 0) >= threshold:
                admitted.append(key)
            elif key not in already:
                self.stores_skipped_in_current_batch += 1
        if counted is not None:
            counted.update(keys)
        return admitted

    def _counted_by(self, req_context: object) -> set[Key] | None:
        """The keys this request has counted since the last reset (None: no request state)."""
        get_state = getattr(req_context, "get_state", None)
        if get_state is None:
            return None
        state = get_state(_CountedOffers)
        if state is None or state.owner is not self or state.generation != self._generation:
            state = _CountedOffers(self, self._generation, set())
            req_context.set_state(state)  # type: ignore[attr-defined]  # vLLM 0.34's ReqContext
        keys: set[Key] = state.keys
        return keys

    def complete_store(
        self, keys: Collection[Key], req_context: object = None, success: bool = True
    ) -> None:
        applied = self.manager.complete_store(keys, success).applied
        if not applied:
            return
        events = self._events
        if events is None:
            return
        if success:
            if self.types.tracked_events:
                events.append(self._make_event(keys=list(applied), medium=self.medium,
                                               removed=False, removal_expected=True,
                                               req_context=req_context))
            else:  # vLLM's field order: keys, medium, removed
                events.append(self._make_event(list(applied), self.medium, False))
        elif self.types.tracked_events:
            events.append(self._make_event(keys=list(applied), medium=self.medium,
                                           removed=True, metadata_only=True))

    def take_events(self) -> Iterator[Any]:
        """vLLM's ``OffloadingEvent`` records since the last call, in order, when events
        are on: a ``removed`` one per store that evicted, a ``stored`` one per completion.

        A metadata-only removal (0.34) keeps only the keys still absent, as vLLM's does.
        """
        events = self._events
        if not events:
            return iter(())
        self._events = []
        if self.types.tracked_events:
            events = [e for e in map(self._still_absent, events) if e is not None]
        return iter(events)

    def _still_absent(self, event: Any) -> Any:
        """A metadata-only removal cut to the keys still absent (None if none is)."""
        if not event.metadata_only:
            return event
        lookup = self.manager.lookup
        absent = [k for k in event.keys if lookup(k) is LookupResult.MISS]
        if len(absent) == len(event.keys):
            return event
        return self._make_event(keys=absent, medium=event.medium, removed=True,
                                metadata_only=True) if absent else None

    def reset_cache(self) -> None:
        """Drop every block; with events on, one ``removed`` event names the READY ones.

        vLLM's own manager announces nothing at a reset, so a subscriber keeps blocks
        that are gone (``docs/engines.md``); the facade tells it, as the spec does."""
        manager, events = self.manager, self._events
        dropped = [key for key, _ in manager.view().ready] if events is not None else []
        manager.reset_cache()
        if dropped and events is not None:
            events.append(self._make_event(keys=dropped, medium=self.medium, removed=True))
        self._generation += 1
        if self.types.orphans_released == "at-reset":
            manager.forget_running_copies()

    # --- request and step hooks of vLLM's base class ------------------------------

    def on_new_request(self, req_context: object = None) -> Any:
        return self.types.request_offloading_context()

    def on_request_finished(self, req_context: object = None) -> None:
        return None

    def on_schedule_end(self, context: object = None) -> None:
        return None

    def has_pending_work(self) -> bool:
        return False

    def on_reset_flushed(self) -> None:
        """vLLM's workers finished every job in flight at the last reset: free their slots."""
        if self.types.orphans_released == "when-flushed":
            self.manager.forget_running_copies()

    def get_load_source(self, key: Key, req_context: object = None) -> Any:
        return self.types.cache_hit_source_host

    def get_stats(self) -> Any:
        """The release's stats object (None where vLLM's manager had none, before 0.24):
        the CPU cache-usage gauge (slots held by stores in flight and blocks being read,
        over all slots; 0.0 with 0 slots) and, with a threshold, the stores skipped."""
        make, names = self.types.stats, self.types.metrics
        if make is None or names is None:
            return None
        stats = make()
        used = self.manager.pinned_slots
        stats.set_gauge(names.CPU_CACHE_USAGE_PERC,
                        used / self.num_slots if self.num_slots else 0.0)
        if self.counts is not None:
            stats.increase_counter(names.STORES_SKIPPED, self.stores_skipped_in_current_batch)
            self.stores_skipped_in_current_batch = 0
        return stats

    def config_info(self) -> Sequence[Mapping[str, Any]]:
        """0.34's static facts of the tier: those of ``info=``, else none."""
        return [self._config_info]

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """vLLM 0.34's exclusion hook: a no-op, the manager is driven by one thread."""
        return nullcontext()

    def shutdown(self) -> None:
        return None


@dataclass
class _CountedOffers:
    """A request's record of the keys it counted toward 0.34's ``store_threshold``."""

    owner: object
    generation: int
    keys: set[Key]


def _slots(num_blocks: int | None, num_chunks: int | None) -> int:
    """The tier's slots: ``num_blocks`` (up to 0.25) or ``num_chunks`` (0.34), one of them.

    raises: UnsupportedArgument, BadCapacity
    """
    if (num_blocks is None) == (num_chunks is None):
        raise UnsupportedArgument(
            f"give the tier's size as num_blocks or num_chunks, exactly one; got "
            f"num_blocks={num_blocks!r}, num_chunks={num_chunks!r}")
    slots = num_blocks if num_blocks is not None else num_chunks
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        raise BadCapacity(f"a tier needs an int number of slots, 0 or more (0: nothing is "
                          f"ever stored, as in vLLM); got {slots!r}")
    return slots


_SUBCLASSES: dict[tuple[type, type], type[VllmFacade]] = {}


def _subclass(facade: type[VllmFacade], base: type) -> type[VllmFacade]:
    """``facade`` that is also a ``base`` (a release's ``OffloadingManager``).

    The facade's methods come first, so they implement the base's abstract ones; a
    method a later release adds keeps the base's default, and a new abstract one makes
    construction fail loudly.

    raises: TypeError
    """
    made = _SUBCLASSES.get((facade, base))
    if made is None:
        made = type(base)(facade.__name__, (facade, base), {
            "__module__": facade.__module__, "__qualname__": facade.__qualname__,
            "__doc__": facade.__doc__})
        missing = sorted(getattr(made, "__abstractmethods__", ()))
        if missing:
            raise TypeError(f"{base.__module__}.{base.__qualname__} requires "
                            f"{', '.join(missing)}, which the facade does not implement")
        _SUBCLASSES[facade, base] = made
    return made


@cache
def _installed_base() -> type | None:
    """vLLM's own ``OffloadingManager`` where vLLM is installed, else None."""
    if importlib.util.find_spec("vllm") is None:
        return None
    types = VllmTypes.from_vllm()
    return types.offloading_manager if types is not None else None
