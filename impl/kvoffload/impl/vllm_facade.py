"""``OffloadManager`` behind vLLM's ``OffloadingManager`` method names and signatures.

``VllmFacade`` can stand in for vLLM's ``CPUOffloadingManager`` (see
``docs/vendoring.md``): same constructor arguments (``num_blocks``, ``cache_policy``,
``enable_events``), same methods, vLLM-shaped outputs. ``lookup`` answers in the
flavour of the vLLM it runs in: ``True`` / ``False`` / ``None`` (0.19 to 0.24) or
``LookupResult.HIT`` / ``MISS`` / ``HIT_PENDING`` (0.25 on; never ``RETRY``, since
the manager always knows).

Where vLLM differs from the spec, the facade follows the spec: duplicate keys take
one slot; a precondition broken (a load of a block that is not READY, an unmatched
``complete_load``) raises a typed :class:`~kvoffload.spec.errors.MisuseError`
instead of an ``assert``; a reset holds the slots of copies still running;
``take_events`` reports the net change of the READY set since the last call (one
``removed`` and one ``stored`` event at most), which replays to the same READY set.

Reset inside vLLM: vLLM's scheduler never passes on completions of jobs from before
a reset (its workers flush them), so the slots of copies a reset left running are
freed when vLLM says they are done: at ``on_reset_flushed()`` where vLLM has that hook
(0.34 on), else at the reset itself, as vLLM's own manager does
(``VllmTypes.orphans_released``). Outside vLLM they are freed by their completions.
vLLM's ``store_threshold`` (a counting lookup) is not offered: lookup stays pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from kvoffload.spec.outputs import StoreRejected
from kvoffload.spec.vocabulary import Key, LookupResult, Policy

from .manager import OffloadManager
from .vllm_types import VllmTypes


class VllmFacade:
    """vLLM's ``OffloadingManager`` API over an :class:`OffloadManager`.

    ``types`` chooses the output classes (and so the lookup flavour): by default
    vLLM's own when vLLM is importable, else the stand-ins with the enum flavour.
    ``req_context`` arguments are accepted and ignored: the spec's manager needs none.

    raises: BadCapacity, UnknownPolicy
    """

    def __init__(
        self,
        num_blocks: int,
        cache_policy: str | Policy = "lru",
        enable_events: bool = False,
        *,
        types: VllmTypes | None = None,
    ) -> None:
        self.manager = OffloadManager(num_blocks, policy=cache_policy)
        self.types = types or VllmTypes.from_vllm() or VllmTypes.stand_ins()
        self.enable_events = enable_events
        self.medium = self.types.medium
        enum = self.types.lookup_result
        answers: tuple[Any, Any, Any] = ((True, None, False) if enum is None else
                                         (enum["HIT"], enum["HIT_PENDING"], enum["MISS"]))
        # The scheduler calls lookup once per block: this instance's lookup is the
        # manager's own, answering in vLLM's values directly (same behaviour as below).
        self.__dict__["lookup"] = self.manager.lookup_function(*answers)
        self._answers = dict(zip((LookupResult.HIT, LookupResult.PENDING, LookupResult.MISS),
                                 answers, strict=True))
        self._spec = self.types.load_store_spec
        self._output = self.types.prepare_store_output

    # --- the scheduler's calls ----------------------------------------------------

    def lookup(self, key: Key, req_context: object = None) -> Any:
        """HIT / MISS / HIT_PENDING (0.25 on), or True / False / None (0.19 to 0.24)."""
        return self._answers[self.manager.lookup(key)]

    def prepare_load(self, keys: Collection[Key], req_context: object = None) -> Any:
        """Pin the blocks; returns a ``CPULoadStoreSpec`` of their host slots.

        raises: NotReadable
        """
        return self._spec(list(self.manager.prepare_load(keys).slots))

    def touch(self, keys: Collection[Key], req_context: object = None) -> None:
        self.manager.touch(keys)

    def complete_load(self, keys: Collection[Key], req_context: object = None) -> None:
        """raises: UnmatchedCompleteLoad"""
        self.manager.complete_load(keys)

    def prepare_store(self, keys: Collection[Key], req_context: object = None) -> Any:
        """A ``PrepareStoreOutput`` (keys to store, their slots, evicted keys), or None
        when the call cannot fit (nothing changes then)."""
        plan = self.manager.prepare_store(keys)
        if isinstance(plan, StoreRejected):
            return None
        return self._output(list(plan.keys), self._spec(list(plan.slots)), list(plan.evicted))

    def complete_store(
        self, keys: Collection[Key], req_context: object = None, success: bool = True
    ) -> None:
        self.manager.complete_store(keys, success)

    def take_events(self) -> Iterator[Any]:
        """``OffloadingEvent`` records (removed first, then stored) when events are on."""
        events = self.manager.take_events()
        if not self.enable_events:
            return
        make = self.types.offloading_event
        if events.removed:
            yield make(keys=list(events.removed), medium=self.medium, removed=True)
        if events.stored:
            yield make(keys=list(events.stored), medium=self.medium, removed=False)

    def reset_cache(self) -> None:
        self.manager.reset_cache()
        if self.types.orphans_released == "at-reset":
            self.manager.forget_running_copies()

    # --- request and step hooks of vLLM's base class (no-ops here) -----------------

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

    def get_stats(self) -> None:
        return None

    def config_info(self) -> Sequence[dict[str, Any]]:
        return [{}]

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """vLLM 0.34's exclusion hook: a no-op, the manager is driven by one thread."""
        return nullcontext()

    def shutdown(self) -> None:
        return None
