"""The trace corpus: language-neutral JSON cases any engine can replay (``docs/corpus.md``).

This module makes the cases (:func:`case_json`) and reads a written corpus
(:func:`load_cases`); :mod:`.corpus_write` writes one (``kvoffload corpus write DIR``:
one JSON file per case under ``DIR/cases/``, an ``index.json`` and the JSON Schema,
``schema.json``, the files follow) and :mod:`.corpus_replay` replays one. Every expected
answer comes from the spec (:func:`kvoffload.spec.apply`), exact wherever the spec is;
what a target may choose is written as a constraint:

- slots and tickets are symbolic names (``s0``, ``t0``) bound at first sight; a new slot
  name must be bound to a slot no other name in its step's ``held`` list (the slots held
  once the step is done) has, a new ticket name to a value never seen before in the case;
- victims are the spec's exact set; where the eviction had a choice, ``evicted_from``
  lists the allowed victims. A case in which a choice comes before its last call (later
  answers depend on it) is tagged ``level: exact`` with its ``policy`` (only targets
  checked at that level and policy replay it); at level any a replayer checks a last
  call's victims against ``evicted_from`` (as many as the spec evicts, distinct), and
  counts the slots (``evicted_from_slots``) of the victims it chose as free, not the
  spec's;
- a case with a PENDING answer is tagged ``profile: strict`` (a safe-profile replayer
  accepts MISS there); ``excluded_by`` lists the assumptions under which a target may
  skip the case (it makes a call they rule out).

Sources (``source`` field): ``scenario`` (the spec's scenario vectors), ``engines``
(hand-picked traces, then every counterexample docs/engines.md lists, committed as calls
in ``corpus_engines.json`` by ``python -m docs.tools.engines_page
--corpus``), ``selftest`` (a trace killing each seeded variant of ``kvoffload check
--self-test``, drawn from the suite's one call generator: :mod:`.corpus_write`),
``counterexample`` (the model checker's shortest counterexample for each mutant and
hazard), and ``tiny`` (every trace of up to ``--max-calls`` calls, 6 by default, at the
model checker's TINY bound, deduplicated up to renaming of keys and slots as the model
checker deduplicates states).

The model checker lives in ``proofs/``, which is not installed and which nothing here
imports: its traces are committed as calls (no answers) in ``corpus_modelcheck.json``,
written by ``python proofs/corpus_traces.py``; every answer is computed here, by the spec.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kvoffload.spec import (
    ASSUMPTIONS,
    CacheState,
    Call,
    Completion,
    Events,
    LoadPlan,
    LookupResult,
    MisuseError,
    Op,
    Policy,
    StorePlan,
    StoreRejected,
)
from kvoffload.spec.scenarios import SCENARIOS

from ..judge.lockstep import assumed_away, initial, spec_apply

CORPUS_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("corpus_schema.json")
MODELCHECK_FILE = Path(__file__).with_name("corpus_modelcheck.json")
"""The model checker's traces (``python proofs/corpus_traces.py`` writes it)."""
ENGINES_FILE = Path(__file__).with_name("corpus_engines.json")
"""Every counterexample docs/engines.md lists (``python -m
docs.tools.engines_page --corpus`` writes it)."""
MAX_CALLS = 6
"""The longest model-checker trace ``corpus_modelcheck.json`` holds."""
TINY_CAPACITY = 2
NEVER_ISSUED = "u0"
"""A ticket name no plan binds: the replayer sends a value the target never issued."""


@dataclass
class _Names:
    """Symbolic names for the spec's slots and tickets, as a case is written."""

    slot: dict[int, str] = field(default_factory=dict)
    ticket: dict[int, str] = field(default_factory=dict)
    slots_made: int = 0

    def new_slot(self, slot: int) -> str:
        name = f"s{self.slots_made}"
        self.slots_made += 1
        self.slot[slot] = name
        return name

    def new_ticket(self, ticket: int) -> str:
        name = f"t{len(self.ticket)}"
        self.ticket[ticket] = name
        return name


def _keys(keys: Sequence[object]) -> list[object]:
    return list(keys)


def _sorted(keys: Iterable[object]) -> list[object]:
    return sorted(keys, key=repr)


def _call_json(call: Call, names: _Names) -> dict[str, Any]:
    data: dict[str, Any] = {"op": call.op.value}
    if call.op not in (Op.RESET_CACHE, Op.TAKE_EVENTS):
        data["keys"] = _keys(call.keys)
    if call.op is Op.COMPLETE_STORE:
        data["success"] = call.success
    if call.ticket is not None:
        data["ticket"] = names.ticket.get(call.ticket, NEVER_ISSUED)
    return data


def _held(state: CacheState, names: _Names) -> list[str]:
    return sorted(names.slot[s] for s in state.used_slots() if s in names.slot)


def _step(state: CacheState, call: Call, names: _Names) -> tuple[CacheState, dict[str, Any],
                                                                   bool]:
    """(next state, the step as JSON, whether an eviction in it had a choice)."""
    call_json = _call_json(call, names)
    try:
        new, output = spec_apply(state, call)
    except MisuseError as error:
        return state, {"call": call_json, "expect": {"kind": "error", "family": error.code},
                       "held": _held(state, names)}, False
    expect: dict[str, Any]
    chose = False
    if isinstance(output, LookupResult):
        expect = {"kind": "lookup", "result": output.name}
    elif isinstance(output, StorePlan):
        candidates = state.evictable() - frozenset(call.keys)
        chose = bool(output.evicted) and len(candidates) > len(output.evicted)
        allowed = _sorted(candidates)
        allowed_slots = [names.slot[state.table[k].slot] for k in allowed]
        for victim in output.evicted:
            names.slot.pop(state.table[victim].slot, None)
        slots = [names.new_slot(s) for s in output.slots]
        expect = {"kind": "store_plan", "keys": _keys(output.keys), "slots": slots,
                  "evicted": _sorted(output.evicted),
                  "ticket": names.new_ticket(output.ticket)}
        if chose:
            expect["evicted_from"] = allowed
            expect["evicted_from_slots"] = allowed_slots
    elif isinstance(output, StoreRejected):
        expect = {"kind": "rejected", "needed": output.needed, "available": output.available}
    elif isinstance(output, LoadPlan):
        slots = [names.slot[s] for s in output.slots]
        expect = {"kind": "load_plan", "keys": _keys(output.keys), "slots": slots,
                  "ticket": names.new_ticket(output.ticket)}
    elif isinstance(output, Completion):
        expect = {"kind": "completion",
                  **{f: _sorted(getattr(output, f))
                     for f in ("applied", "released", "ignored")}}
    elif isinstance(output, Events):
        expect = {"kind": "events", "ready": _sorted(new.announced)}
    elif isinstance(output, int):
        expect = {"kind": "reset", "epoch": output}
    else:
        expect = {"kind": "none"}
    return new, {"call": call_json, "expect": expect, "held": _held(new, names)}, chose


def case_json(name: str, source: str, about: str, capacity: int, policy: Policy,
              calls: Sequence[Call]) -> dict[str, Any]:
    """One case: the calls with the spec's answers, tagged with what it needs.

    Each call is asked of the spec once: whether ``no-misuse`` rules it out and its
    answer are one ``apply`` (:func:`~kvoffload.conformance.judge.lockstep.assumed_away`
    keeps the answer its step then reads), from the judge's one empty state per tier."""
    state = initial(capacity, policy)
    names = _Names()
    steps = []
    chose = False
    excluded: set[str] = set()
    pending = False
    for number, call in enumerate(calls, 1):
        for assumption in ASSUMPTIONS.values():
            if assumed_away(state, call, (assumption,)):
                excluded.add(assumption.name)
        state, step, choice = _step(state, call, names)
        # A choice in the last call leaves no later answer depending on it: the case
        # stays at level any, its victims checked against ``evicted_from``.
        chose = chose or (choice and number < len(calls))
        pending = pending or step["expect"] == {"kind": "lookup", "result": "PENDING"}
        steps.append(step)
    return {
        "corpus_version": CORPUS_VERSION, "name": name, "source": source, "about": about,
        "capacity": capacity, "policy": policy.value,
        "level": "exact" if chose else "any",
        "profile": "strict" if pending else "safe",
        "excluded_by": sorted(excluded), "steps": steps,
    }


# --- sources ---------------------------------------------------------------------------

def scenario_cases() -> Iterator[dict[str, Any]]:
    for scenario in SCENARIOS:
        yield case_json(f"scenario-{scenario.name}", "scenario", scenario.about,
                        scenario.capacity, scenario.policy, [s.call for s in scenario.steps])


def _c(op: Op, *keys: str, **kw: Any) -> Call:
    return Call(op, tuple(keys), **kw)


PS, CS, PL, CL, L, R = (Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.PREPARE_LOAD,
                        Op.COMPLETE_LOAD, Op.LOOKUP, Op.RESET_CACHE)

ENGINE_TRACES: tuple[tuple[str, str, int, tuple[Call, ...]], ...] = (
    ("lmcache-cpu-store-in-flight", "LMCache CPU: a chunk being written is PENDING", 1,
     (_c(PS, "a"), _c(L, "a"))),
    ("lmcache-cpu-put-after-clear", "LMCache CPU: a store completing after a reset does "
     "not bring its chunk back", 1, (_c(PS, "a"), _c(R), _c(CS, "a"), _c(L, "a"))),
    ("lmcache-cpu-clear-while-read", "LMCache CPU: a reset drops a chunk being read", 1,
     (_c(PS, "a"), _c(CS, "a"), _c(PL, "a"), _c(R), _c(L, "a"))),
    ("lmcache-cpu-load-after-clear-while-read", "LMCache CPU (--profile safe, misuse): a "
     "chunk being read survives clear(), so a second read after the reset is accepted; "
     "the spec's reset dropped it, and the read must be refused", 1,
     (_c(PS, "a"), _c(CS, "a"), _c(PL, "a"), _c(R), _c(PL, "a"))),
    ("lmcache-cpu-store-while-storing", "a second store of a key being stored stores "
     "nothing", 2, (_c(PS, "a"), _c(PS, "a"))),
    ("lmcache-cpu-read-refreshes-lru", "LRU: a read makes its key most recently used", 2,
     (_c(PS, "a"), _c(CS, "a"), _c(PS, "b"), _c(CS, "b"), _c(PL, "a"), _c(CL, "a"),
      _c(PS, "c"))),
    ("lmcache-disk-failed-store-frees", "a failed store frees its slot", 2,
     (_c(PS, "a"), _c(CS, "a"), _c(PS, "b"), _c(CS, "b", success=False), _c(PS, "c"))),
    ("lmcache-disk-failed-store-retried", "a key whose store failed can be stored again",
     1, (_c(PS, "a"), _c(CS, "a", success=False), _c(PS, "a"))),
    ("lmcache-multi-chunk-rejection", "a store that does not fit is rejected whole", 1,
     (_c(PS, "a", "b"),)),
    ("vllm-0.18-complete-store-empty", "vLLM 0.18: a completion for a key no store runs "
     "is ignored", 1, (_c(CS, "a"),)),
    ("vllm-0.20-pr41795", "vLLM 0.20.2: a block whose store is in flight is PENDING", 4,
     (_c(PS, "a"), _c(L, "a"))),
    ("vllm-0.24-reset-events", "vLLM 0.24 to 0.34: a reset's removals reach the "
     "subscriber", 1, (_c(PS, "a"), _c(CS, "a"), _c(R), _c(Op.TAKE_EVENTS))),
    ("vllm-duplicate-key-store", "vLLM 0.18 to 0.25: a key named twice is stored once",
     2, (_c(PS, "a", "a"),)),
    ("vllm-duplicate-key-store-1-slot", "vLLM 0.24, 0.25: a key named twice fits one slot",
     1, (_c(PS, "a", "a"),)),
    ("vllm-unmatched-complete-load", "vLLM 0.18: complete_load with no load is misuse", 1,
     (_c(CL, "a"),)),
    ("vllm-load-misuse-pins-nothing", "vLLM 0.20, 0.21: a rejected prepare_load pins "
     "nothing", 1, (_c(PS, "a"), _c(CS, "a"), _c(PL, "a", "b"), _c(PS, "n"))),
    ("vllm-store-into-running-slot", "vLLM 0.24, 0.25: a slot a reset left a running copy "
     "in is not handed out", 1, (_c(PS, "a"), _c(R), _c(PS, "a"))),
    ("vllm-O-prepare-load-empty", "vLLM 0.24 under -O: prepare_load on an empty tier is "
     "misuse", 1, (_c(PL, "a"),)),
)
"""Counterexamples recorded in docs/engines.md (LMCache's, and vLLM's PR #41795 shape)."""


def engine_cases() -> Iterator[dict[str, Any]]:
    """The hand-picked :data:`ENGINE_TRACES`, then every counterexample docs/engines.md
    lists (``corpus_engines.json``), each tagged (``run``) with the profile, policy,
    level and assumptions of the ``kvoffload check`` run that found it."""
    for name, about, capacity, calls in ENGINE_TRACES:
        yield case_json(f"engines-{name}", "engines", about, capacity, Policy.LRU, calls)
    for entry in engines_data()["counterexamples"]:
        case = case_json(f"engines-{entry['name']}", "engines",
                         f"docs/engines.md: {entry['command']} fails {entry['property']}: "
                         f"{entry['message']}", entry["capacity"], Policy(entry["policy"]),
                         [decode_call(c) for c in entry["calls"]])
        case["run"] = {f: entry[f] for f in ("profile", "policy", "level", "assume")}
        yield case


def engines_data() -> dict[str, Any]:
    """``corpus_engines.json``, read once per process (callers only read it)."""
    return _committed(ENGINES_FILE)


@cache
def _committed(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _canonical(calls: Sequence[Call]) -> tuple[object, ...]:
    """The trace up to renaming of keys (first seen, first named) and tickets."""
    rename: dict[object, int] = {}
    tickets: dict[int, int] = {}
    out: list[object] = []
    for call in calls:
        keys = tuple(rename.setdefault(k, len(rename)) for k in call.keys)
        ticket = None if call.ticket is None else tickets.setdefault(call.ticket, len(tickets))
        out.append((call.op.value, keys, call.success, ticket))
    return tuple(out)


# --- the model checker's traces (committed; proofs/corpus_traces.py) ---------------------

def decode_call(data: Sequence[Any]) -> Call:
    """``[op, keys, success, ticket]``, or with a fifth item, ``job``: the job a
    completion really belongs to (:class:`kvoffload.spec.Call`; engines traces)."""
    op, keys, success, ticket, *job = data
    return Call(Op(op), tuple(keys), success=success, ticket=ticket,
                job=job[0] if job else None)


def modelcheck_data() -> dict[str, Any]:
    """``corpus_modelcheck.json`` (772 KB), read once per process, not once per source
    of cases that uses it (callers only read it)."""
    return _committed(MODELCHECK_FILE)


def modelcheck_traces(max_calls: int = MAX_CALLS, data: dict[str, Any] | None = None
                      ) -> Iterator[tuple[str, Policy, tuple[Call, ...]]]:
    """The model checker's TINY traces of up to ``max_calls`` calls: per search (LRU and
    ARC with tickets, LRU with vLLM's completions), a shortest trace to each node class
    found within ``max_calls - 1`` calls, then each call class made there."""
    if not 0 <= max_calls <= MAX_CALLS:
        raise ValueError(f"the model checker's traces go up to {MAX_CALLS} calls, "
                         f"not {max_calls}")
    data = modelcheck_data() if data is None else data
    for name, tree in data["tiny"].items():
        paths: list[tuple[Call, ...]] = [()]
        for parent, call in tree["nodes"][1:]:
            paths.append((*paths[parent], decode_call(call)))
        for node, call in tree["cases"]:
            if len(paths[node]) < max_calls:
                yield name, Policy(tree["policy"]), (*paths[node], decode_call(call))


def tiny_cases(max_calls: int = MAX_CALLS) -> Iterator[dict[str, Any]]:
    """One case per model-checker trace, deduplicated across the searches: two traces
    equal up to renaming of keys and tickets give one case (at level any the policy
    makes no difference; a case at level exact is kept per policy)."""
    seen: set[tuple[object, ...]] = set()
    number = 0
    for search, policy, calls in modelcheck_traces(max_calls):
        shape = _canonical(calls)
        if shape in seen or (policy.value, shape) in seen:
            continue
        case = case_json(f"tiny-{len(calls)}-{number:05d}", "tiny",
                         f"model checker, TINY, {search}: trace {number} of up to "
                         f"{max_calls} calls", TINY_CAPACITY, policy, calls)
        seen.add(shape if case["level"] == "any" else (policy.value, shape))
        number += 1
        yield case


def counterexample_cases() -> Iterator[dict[str, Any]]:
    """The model checker's shortest counterexample of every check that must find one
    (its mutants and hazards), with the spec's answers: for a spec mutant the trace is
    the one that shows the mutant's answer differing from these."""
    for found in modelcheck_data()["counterexamples"]:
        name = found["check"].replace(":", "-").replace("+", "-")
        yield case_json(f"counterexample-{name}", "counterexample",
                        f"{found['about']} (python proofs/check.py --check {found['check']}"
                        f": {found['property']})", found["capacity"],
                        Policy(found["policy"]), [decode_call(c) for c in found["calls"]])


def load_cases(directory: Path) -> list[dict[str, Any]]:
    """Every case under ``directory/cases``, after checking the corpus version."""
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    if index.get("corpus_version") != CORPUS_VERSION:
        raise ValueError(f"{directory} holds corpus version {index.get('corpus_version')}; "
                         f"this kvoffload reads version {CORPUS_VERSION}")
    folder = os.path.join(directory, "cases")
    cases = []
    for name in index["cases"]:  # os.path, as pathlib's ``/`` reads (a third less CPU)
        with open(os.path.join(folder, f"{name}.json"), encoding="utf-8") as file:
            cases.append(json.loads(file.read()))
    return cases

