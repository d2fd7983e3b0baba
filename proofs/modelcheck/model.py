"""Which transitions are checked: a table of the eight operations.

:data:`SPEC` holds the spec's own transitions. A mutant (:mod:`.mutants`) is the same
table with one entry wrapped so that it breaks one rule; the spec itself is never edited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvoffload.spec import (
    CacheState,
    Call,
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    Op,
    Output,
    StorePlan,
    StoreRejected,
)
from kvoffload.spec import transitions as t

Keys = tuple[Key, ...]
LookupFn = Callable[[CacheState, Key], tuple[CacheState, LookupResult]]
PrepareLoadFn = Callable[[CacheState, Keys], tuple[CacheState, LoadPlan]]
CompleteLoadFn = Callable[[CacheState, Keys, "int | None"], tuple[CacheState, Completion]]
TouchFn = Callable[[CacheState, Keys], tuple[CacheState, None]]
Slots = Sequence[int] | None
PrepareStoreFn = Callable[
    [CacheState, Keys, Slots], tuple[CacheState, "StorePlan | StoreRejected"]]
CompleteStoreFn = Callable[
    [CacheState, Keys, bool, "int | None"], tuple[CacheState, Completion]]
ResetFn = Callable[[CacheState], tuple[CacheState, int]]
TakeEventsFn = Callable[[CacheState], tuple[CacheState, Events]]


@dataclass(frozen=True)
class Model:
    """The transitions one check explores, by vLLM's operation names."""

    name: str
    about: str
    lookup: LookupFn
    prepare_load: PrepareLoadFn
    complete_load: CompleteLoadFn
    touch: TouchFn
    prepare_store: PrepareStoreFn
    complete_store: CompleteStoreFn
    reset_cache: ResetFn
    take_events: TakeEventsFn

    def apply(self, state: CacheState, call: Call, slots: Slots = None
              ) -> tuple[CacheState, Output]:
        """Run ``call`` with this model's transition of the same name; ``slots`` are the
        free slots a ``prepare_store`` hands out (None: the lowest free ones).

        raises: MisuseError
        """
        op = call.op
        if op is Op.LOOKUP:
            return self.lookup(state, call.keys[0])
        if op is Op.PREPARE_LOAD:
            return self.prepare_load(state, call.keys)
        if op is Op.COMPLETE_LOAD:
            return self.complete_load(state, call.keys, call.epoch)
        if op is Op.TOUCH:
            return self.touch(state, call.keys)
        if op is Op.PREPARE_STORE:
            return self.prepare_store(state, call.keys, slots)
        if op is Op.COMPLETE_STORE:
            return self.complete_store(state, call.keys, call.success, call.epoch)
        if op is Op.RESET_CACHE:
            return self.reset_cache(state)
        return self.take_events(state)


def _prepare_store(state: CacheState, keys: Keys, slots: Slots
                   ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return t.prepare_store(state, keys, slots=slots)


SPEC = Model(
    name="spec",
    about="the spec's transitions, unchanged",
    lookup=t.lookup,
    prepare_load=t.prepare_load,
    complete_load=t.complete_load,
    touch=t.touch,
    prepare_store=_prepare_store,
    complete_store=t.complete_store,
    reset_cache=t.reset_cache,
    take_events=t.take_events,
)
