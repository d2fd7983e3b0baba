"""What ``python -m proofs.crosshair_check`` installs in CrossHair before it checks a file.

* **Arguments from bounded domains** (:mod:`.domain`). CrossHair makes a symbolic int
  per argument and this plugin turns it into one value of a finite list by comparisons
  (a binary descent), so CrossHair forks one path per value and can exhaust them all:
  ``CacheState`` ranges over the domain's states, ``Key`` (``Hashable``) over the key
  universe and one fresh key, :class:`.domain.Keys` over every list of up to ``width``
  keys, :class:`.domain.TicketNumber` over the tickets the states hold and the next
  one, ``Call`` over every call of the API on those keys and tickets.
* **The spec runs natively.** Each public function of the spec (the transitions,
  ``apply``, ``replay``, the invariants) is replaced, for CrossHair, by one that
  realizes its arguments (any symbolic value a contract made, a ``list[int]`` say,
  becomes the concrete one CrossHair chose on that path) and runs the spec's code
  untraced: the same code, a path about 12 ms instead of 50 ms traced (measured on a
  lookup contract).
* **A mutant or a manager**, named by the environment: ``KVOFFLOAD_CROSSHAIR_MUTANT``
  (a spec mutant of ``proofs/modelcheck/mutants.py``: the transitions of the operations
  it replaces become the mutant's, wherever a contract calls them) and
  ``KVOFFLOAD_CROSSHAIR_MANAGER`` (``module:Class``, the manager
  :func:`.manager.difference` drives).

Settings come from the environment so that the ``--extra_plugin`` file stays one line:
``KVOFFLOAD_CROSSHAIR_DOMAINS`` (comma-separated names of :data:`.domain.BOUNDS`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from crosshair.statespace import context_statespace

import kvoffload.spec as spec
from crosshair import NoTracing, SymbolicFactory, deep_realize, register_patch, register_type
from kvoffload.spec import CacheState, Call, Op, Output, calls, invariants, transitions

from .domain import BOUNDS, Domain, Keys, TicketNumber, load

T = TypeVar("T")

DOMAINS = "KVOFFLOAD_CROSSHAIR_DOMAINS"
MUTANT = "KVOFFLOAD_CROSSHAIR_MUTANT"
MANAGER = "KVOFFLOAD_CROSSHAIR_MANAGER"


def domains() -> tuple[Domain, ...]:
    names = os.environ.get(DOMAINS, "lru,arc").split(",")
    return tuple(load(BOUNDS[name.strip()]) for name in names if name.strip())


def pick(factory: SymbolicFactory, values: Sequence[T]) -> T:
    """One of ``values``, chosen by comparisons of a fresh symbolic int: one path each."""
    choice = factory(int)
    space = context_statespace()
    low, high = 0, len(values)
    while high - low > 1:
        middle = (low + high) // 2
        # A fair coin at every step (CrossHair's default leans 3 to 1 towards False,
        # which would make the first values of a long list all but unreachable).
        below: Any = choice < middle  # a SymbolicBool: .var is its SMT expression
        if space.choose_possible(below.var, probability_true=0.5):
            high = middle
        else:
            low = middle
    return values[low]


def _union(lists: Sequence[Sequence[T]]) -> tuple[T, ...]:
    return tuple(dict.fromkeys(v for values in lists for v in values))


def alphabet(keys: Sequence[Hashable], key_lists: Sequence[tuple[Hashable, ...]],
             tickets: Sequence[int]) -> tuple[Call, ...]:
    """Every call of the API on these keys, key lists and tickets (None: vLLM's form),
    the environment's background eviction (D14) of each key list, and a node's failure
    (D15)."""
    lists = [k for k in key_lists if k]
    found: list[Call] = [Call(Op.LOOKUP, (key,)) for key in keys]
    for op in (Op.PREPARE_STORE, Op.PREPARE_LOAD, Op.TOUCH, Op.EVICT_IN_BACKGROUND):
        found += [Call(op, k) for k in lists]
    for ticket in (None, *tickets):
        found += [Call(Op.COMPLETE_LOAD, k, ticket=ticket) for k in lists]
        found += [Call(Op.COMPLETE_STORE, k, success=s, ticket=ticket)
                  for k in lists for s in (True, False)]
    return (*found, Call(Op.RESET_CACHE), Call(Op.TAKE_EVENTS), Call(Op.FAIL_NODE))


def natively(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` on realized arguments, untraced (what CrossHair calls instead of ``fn``)."""
    def run(*args: Any, **kwargs: Any) -> Any:
        with NoTracing():  # type: ignore[no-untyped-call]  # crosshair's __init__ is untyped
            args = tuple(deep_realize(a) for a in args)
            kwargs = {k: deep_realize(v) for k, v in kwargs.items()}
            return fn(*args, **kwargs)

    run.__name__ = getattr(fn, "__name__", "run")
    run.__doc__ = fn.__doc__
    return run


def _mutated(name: str) -> dict[Callable[..., Any], Callable[..., Any]]:
    """The spec's functions a mutant replaces, each with the mutant's version."""
    from proofs.modelcheck.mutants import MUTANTS_BY_NAME

    model = MUTANTS_BY_NAME[name].model

    def through(op: Op) -> Callable[..., tuple[CacheState, Output]]:
        def transition(state: CacheState, *args: Any, **kwargs: Any
                       ) -> tuple[CacheState, Output]:
            call = _as_call(op, args, kwargs)
            return model.apply(state, call, kwargs.get("slots"))
        return transition

    replaced: dict[Callable[..., Any], Callable[..., Any]] = {
        getattr(transitions, op.value): through(op) for op in model.replaced}

    def apply(state: CacheState, call: Call, victims: Any = None, slots: Any = None
              ) -> tuple[CacheState, Output]:
        return model.apply(state, call, slots)

    replaced[calls.apply] = apply
    return replaced


def _as_call(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
    """The :class:`Call` a transition's own arguments describe."""
    if op in (Op.RESET_CACHE, Op.TAKE_EVENTS):
        return Call(op)
    if op is Op.LOOKUP:
        return Call(op, (args[0] if args else kwargs["key"],))
    keys = tuple(args[0] if args else kwargs["keys"])
    if op is Op.COMPLETE_STORE:
        success = args[1] if len(args) > 1 else kwargs.get("success", True)
        ticket = args[2] if len(args) > 2 else kwargs.get("ticket")
        return Call(op, keys, success=success, ticket=ticket)
    if op is Op.COMPLETE_LOAD:
        return Call(op, keys, ticket=args[1] if len(args) > 1 else kwargs.get("ticket"))
    return Call(op, keys)


def install() -> None:
    """Register the creators and the native spec with CrossHair (once per process)."""
    found = domains()
    states = _union([d.states for d in found])
    keys = _union([d.keys for d in found])
    key_lists = _union([d.key_lists for d in found])
    tickets = _union([d.tickets for d in found])
    calls_ = alphabet(keys, key_lists, tickets)
    register_type(CacheState, lambda factory: pick(factory, states))
    register_type(Keys, lambda factory: Keys(pick(factory, key_lists)))
    register_type(TicketNumber, lambda factory: TicketNumber(pick(factory, tickets)))
    # The operation first, then its arguments: each operation is as likely as another,
    # whatever the number of its argument combinations.
    by_op = tuple(tuple(c for c in calls_ if c.op is op) for op in Op)
    register_type(Call, lambda factory: pick(factory, pick(factory, by_op)))
    # CrossHair registers Hashable itself (a symbolic int or str); the spec's Key is
    # Hashable, so a contract's key argument comes from the universe instead.
    import crosshair.core

    crosshair.core._SIMPLE_PROXIES.pop(Hashable, None)
    register_type(Hashable, lambda factory: pick(factory, keys))

    replaced = _mutated(os.environ[MUTANT]) if os.environ.get(MUTANT) else {}
    public = [getattr(transitions, op.value) for op in Op]
    public += [calls.apply, calls.replay, invariants.broken_invariants,
               invariants.check_invariants, *invariants.INVARIANTS]
    with contextlib.suppress(ImportError):  # the laws (issue 24, item 1), where present
        public.append(importlib.import_module("kvoffload.spec.laws").broken_laws)
    for fn in public:
        register_patch(fn, natively(replaced.get(fn, fn)))
    from .manager import difference

    register_patch(difference, natively(difference))
    if spec.apply is not calls.apply:  # pragma: no cover - the package re-exports it
        raise RuntimeError("kvoffload.spec.apply is not kvoffload.spec.calls.apply")


def native(fn: Callable[..., T]) -> Callable[..., T]:
    """Mark a contract helper to run natively under CrossHair (as the spec does); the
    function itself is returned unchanged."""
    register_patch(fn, natively(fn))
    return fn
