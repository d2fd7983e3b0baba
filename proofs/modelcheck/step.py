"""One call on the model under check, and the rules checked on that call.

The call rules of ``docs/spec.md`` are stated twice, and both statements are checked on
every call. Once by the spec's transitions: a model that replaces an operation (a
mutant) must answer every call as the spec's own transition does on the same state with
the same free-slot choice (``follows_the_spec``, the comparison). Once by the spec's
laws (:mod:`kvoffload.spec.laws`), which never run a transition: every call of every
model, the spec's included, must satisfy each of them (a broken one is reported by its
name). What the spec cannot state is the environment's part: which copy a completion
really reports (``completions_attributed``), that the completion of a running copy is
never refused (``legit_calls_accepted``), and that nothing raises an error other than a
typed misuse error (``no_internal_errors``). Only the rules the check selects are
computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from kvoffload.spec import (
    CacheState,
    Completion,
    KvOffloadError,
    LoadPlan,
    MisuseError,
    Op,
    Output,
    Phase,
    StorePlan,
    unique,
)
from kvoffload.spec import apply as spec_apply
from kvoffload.spec.laws import LAW_NAMES, Law, Step, laws_of

from .model import Model, spec_transition
from .node import LOAD, STORE, Action, Form, Job, Node, Outcome
from .properties import COMPARISON, EDGE_PROPERTIES

Broken = tuple[str, str] | None

_LAWS = frozenset(LAW_NAMES)
_JOB_CALLS = (Op.PREPARE_STORE, Op.PREPARE_LOAD, Op.FAIL_NODE)
"""The calls that start jobs, or end them without naming them (``fail_node``, D15); a
tuple: ``in`` compares by identity, no hashing."""
_PREPARE_STORE, _PREPARE_LOAD, _FAIL_NODE = Op.PREPARE_STORE, Op.PREPARE_LOAD, Op.FAIL_NODE
_TICKET, _VLLM, _STORING = Form.TICKET, Form.VLLM, Phase.STORING
"""The members :func:`step` compares with on every call, read once: on Python 3.11 an
``Enum.MEMBER`` read goes through the enum's metaclass and takes about 0.2 us, a module
name's about 0.015 us (a TINY exploration makes half a million calls)."""
_made = tuple.__new__
"""Makes a :class:`~.node.Node` or an :class:`~.node.Outcome` from all its fields:
``_made(Outcome, (node, output, violation))``. A named tuple's own constructor is a
Python function around this (0.7 against 0.35 us), and :func:`step` makes one or two
per call."""
DEFAULT_RULES = frozenset(EDGE_PROPERTIES) - _LAWS
"""What a call is checked against unless a check selects otherwise: every rule but the
laws, which have rows of their own (``--laws-only``)."""


def step(model: Model, form: Form, node: Node, action: Action,
         rules: frozenset[str] = DEFAULT_RULES) -> Outcome:
    """Run ``action`` on ``node`` with ``model``; check the call's rules that are in
    ``rules`` (the first one broken is reported)."""
    s, call = node.state, action.call
    try:  # the spec's own transition unless the model replaces some (Model.apply, one call less)
        new, out = (model.apply(s, call, action.slots) if model.replaced
                    else spec_apply(s, call, None, action.slots))
    except MisuseError as error:
        # The call's answer, kept in the Outcome: without its traceback, whose frames
        # (the caller's among them, by f_back) would hold the search's values in a
        # reference cycle, which only the cyclic collector frees.
        error.__traceback__ = None
        broken = _call_rules(rules, model, node, action, error, None)
        if broken is None and action.jobs and "legit_calls_accepted" in rules:
            broken = ("legit_calls_accepted", f"{call} completes a running copy but "
                      f"raised {error}")
        return _made(Outcome, (None, error, broken))
    except KvOffloadError as error:
        error.__traceback__ = None  # as above
        if "no_internal_errors" in rules:
            return Outcome(None, error, ("no_internal_errors", f"{call} raised {error!r}"))
        return Outcome(None, error, _call_rules(rules, model, node, action, error, None))
    comparison, laws = _checked(rules)
    broken = _call_rules(rules, model, node, action, out, new) if (
        comparison and model.replaced) or laws else None
    jobs = _jobs_after(node, action, out) if action.jobs or call.op in _JOB_CALLS else node.jobs
    done = node.done
    if action.jobs:
        if broken is None and "completions_attributed" in rules:
            broken = _check_attributed(form, node, action, out)
        if form is _VLLM:
            done = _remembered(done, action.jobs)
    elif form is _VLLM and call.op is _FAIL_NODE:
        done = _remembered(done, _ended_by_failure(node))  # they may still report, late
    # A call that changes nothing (a lookup, a touch, take_events with nothing to
    # deliver, a completion that lands nowhere) returns the state it was given, and
    # leaves the node itself: the explorer skips it without looking its form up. (A new
    # state equal to the old one, which only a mutant returns, is a node the explorer
    # finds numbered already: comparing every new state with the old one cost more.)
    same = jobs is node.jobs and done is node.done and new is s
    next_node = node if same else _made(Node, (new, jobs, done))
    return _made(Outcome, (next_node, out, broken))


def _remembered(done: tuple[tuple[str, str, int], ...], finished: Sequence[Job]
                ) -> tuple[tuple[str, str, int], ...]:
    """``done`` with each finished job as the last one of its kind and key."""
    latest = {(kind, key): ticket for kind, key, ticket in done}
    for kind, key, ticket, _ in finished:
        latest[kind, key] = ticket
    return tuple(sorted((kind, key, ticket) for (kind, key), ticket in latest.items()))


def _call_rules(rules: frozenset[str], model: Model, node: Node, action: Action,
                answer: Output | Exception, after: CacheState | None) -> Broken:
    """The comparison with the spec (if selected), then the selected laws."""
    comparison, laws = _checked(rules)
    if comparison and model.replaced:
        got = answer if isinstance(answer, Exception) else (after, answer)
        broken = _differs(model, node, action, got)
        if broken is not None:
            return broken
    if laws:
        return _lawless(rules, Step(node.state, action.call, answer, after))
    return None


@cache
def _checked(rules: frozenset[str]) -> tuple[bool, bool]:
    """Does ``rules`` select the comparison, and any law? (asked on every call)"""
    return COMPARISON in rules, not rules.isdisjoint(_LAWS)


def _lawless(rules: frozenset[str], observed: Step) -> Broken:
    """The first selected law the call breaks, with the law's statement."""
    for law in _selected_laws(observed.call.op, rules):
        if not law(observed):
            rule = " ".join((law.__doc__ or "").split())
            left = "no state (it raised)" if observed.after is None else _changed(observed)
            return (law.__name__, f"{observed.call} answers {observed.answer!r} and leaves "
                    f"{left}; this breaks the law: {rule}")
    return None


@cache
def _selected_laws(op: Op, rules: frozenset[str]) -> tuple[Law, ...]:
    """The laws about ``op`` that are among ``rules``."""
    return tuple(law for law in laws_of(op) if law.__name__ in rules)


def _changed(observed: Step) -> str:
    """The fields the call changed, as they are after it."""
    after = observed.after
    fields = [f for f in ("blocks", "orphans", "recency", "epoch", "announced", "next_ticket")
              if after is not None and getattr(after, f) != getattr(observed.before, f)]
    if not fields:
        return "the state unchanged"
    return f"{', '.join(fields)}: {_fields(after, fields)}"


def _differs(model: Model, node: Node, action: Action,
             got: tuple[object, Output] | Exception) -> Broken:
    """Did a replaced operation answer otherwise than the spec's transition would?"""
    if action.call.op not in model.replaced:
        return None
    try:
        want: tuple[object, Output] | Exception = spec_transition(
            node.state, action.call, action.slots)
    except MisuseError as error:
        want = error.with_traceback(None)  # no cycle through this frame (see step)
    if isinstance(want, BaseException) or isinstance(got, BaseException):
        if type(want) is type(got):
            return None
    elif want == got:
        return None
    if not isinstance(want, BaseException) and not isinstance(got, BaseException) \
            and want[1] == got[1]:
        fields = [f for f in ("blocks", "orphans", "recency", "epoch", "announced", "next_ticket")
                  if getattr(want[0], f) != getattr(got[0], f)]
        return ("follows_the_spec", f"{action.call} returns {got[1]!r} as the spec does, "
                f"but leaves other {', '.join(fields)}: {_fields(got[0], fields)}; the "
                f"spec's: {_fields(want[0], fields)}")
    return ("follows_the_spec", f"{action.call}: the spec's {action.call.op.value} "
            f"{_describe(want)}; the model's {_describe(got)}")


def _describe(result: tuple[object, Output] | Exception) -> str:
    if isinstance(result, BaseException):
        return f"raises {type(result).__name__}"
    return f"returns {result[1]!r}"


def _fields(state: object, fields: list[str]) -> str:
    return ", ".join(str(getattr(state, f)) for f in fields)


def _jobs_after(node: Node, action: Action, out: Output) -> tuple[Job, ...]:
    s, call = node.state, action.call
    if call.op is _PREPARE_STORE and isinstance(out, StorePlan):
        started = [(STORE, str(k), out.ticket, slot)
                   for k, slot in zip(out.keys, out.slots, strict=False)]
        return _with_jobs(node.jobs, started, ())
    if call.op is _PREPARE_LOAD and isinstance(out, LoadPlan):
        loads = [(LOAD, str(k), out.ticket, s.table[k].slot) for k in unique(call.keys)]
        return _with_jobs(node.jobs, loads, ())
    if call.op is _FAIL_NODE:
        return _with_jobs(node.jobs, (), _ended_by_failure(node))
    return _with_jobs(node.jobs, (), action.jobs)


def _ended_by_failure(node: Node) -> tuple[Job, ...]:
    """The jobs a node's failure ends (D15): every copy running on a live block (a
    STORING block's store, a READY block's loads), whose memory went with the node.
    The copies a reset left running go on: their completions still come."""
    s = node.state
    return tuple(j for j in node.jobs if _runs_live(s, j[0], j[1], j[2]))


def _with_jobs(jobs: tuple[Job, ...], started: Sequence[Job], finished: Sequence[Job]
               ) -> tuple[Job, ...]:
    if not started and not finished:
        return jobs
    out = list(jobs)
    for job in finished:
        out.remove(job)
    out.extend(started)
    out.sort()
    return tuple(out)


def _check_attributed(form: Form, node: Node, action: Action, out: Output) -> Broken:
    """A running copy's completion finishes a live block or releases a copy a reset left
    running, never nothing; in the ticket form, exactly the job's own one."""
    if not isinstance(out, Completion):
        return ("completions_attributed", f"{action.call} returned {out!r}")
    for kind, key, ticket, _ in action.jobs:
        if form is _TICKET:
            live = _runs_live(node.state, kind, key, ticket)
            found = out.applied if live else out.released
            if key not in found:
                where = "applied" if live else "released"
                return ("completions_attributed", f"{action.call}: job {ticket} of {key!r} "
                        f"must be {where}; got {out}")
        elif key not in out.applied and key not in out.released:
            return ("completions_attributed",
                    f"{action.call}: the completion of a running copy of {key!r} was "
                    f"ignored; got {out}")
    return None


def _runs_live(s: CacheState, kind: str, key: str, ticket: int) -> bool:
    """Is job ``ticket`` running on ``key``'s live block (not on a copy a reset left)?"""
    block = s.table.get(key)
    if block is None:
        return False
    if kind == STORE:
        return block.phase is _STORING and block.ticket == ticket
    return ticket in block.loads
