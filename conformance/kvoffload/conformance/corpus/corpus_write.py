"""``kvoffload corpus write DIR``: every source of cases, in order, written as JSON.

The ``selftest`` source lives here, not in :mod:`.corpus`, because finding a trace
that kills a seeded variant takes the suite itself: calls from the one call generator
(:mod:`kvoffload.conformance.judge.generator`, as ``kvoffload check`` draws them, with fixed seeds
and no Hypothesis), judged in lockstep (:mod:`kvoffload.conformance.judge.lockstep`) and shrunk by
:mod:`kvoffload.conformance.judge.shrink`'s passes, each candidate replayed as the case it would be
written as (:mod:`.corpus_replay`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from kvoffload.spec import CacheState, Call

from ..config import CheckConfig
from ..errors import PropertyViolation
from ..judge.generator import CallGenerator, Rules
from ..judge.lockstep import Lockstep, construct
from ..judge.shrink import shrink_calls
from ..selftest.selftest import CATALOGUE, Entry
from ..target.targets import Prepared, prepare
from .corpus import (
    CORPUS_VERSION,
    MAX_CALLS,
    SCHEMA_FILE,
    case_json,
    counterexample_cases,
    decode_call,
    engine_cases,
    modelcheck_data,
    scenario_cases,
    tiny_cases,
)
from .corpus_replay import replay_case

SELFTEST_SEED = 20261202
SELFTEST_TRIES = 1500
"""Random examples tried per variant (fixed seeds) before giving up on it."""
SELFTEST_BURSTS = 3
"""Bursts of the call generator per example (8 calls each), then the drain."""


def all_cases(selftest: bool = True, max_calls: int = MAX_CALLS) -> Iterator[dict[str, Any]]:
    yield from scenario_cases()
    yield from engine_cases()
    if selftest:
        yield from selftest_cases()
    yield from counterexample_cases()
    yield from tiny_cases(max_calls)


def write_corpus(directory: Path, selftest: bool = True,
                 max_calls: int = MAX_CALLS) -> dict[str, int]:
    """Write the corpus under ``directory``; returns how many cases each source gave."""
    cases = directory / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for old in cases.glob("*.json"):
        old.unlink()
    counts: dict[str, int] = {}
    names = []
    for case in all_cases(selftest, max_calls):
        (cases / f"{case['name']}.json").write_text(case_text(case), encoding="utf-8")
        counts[case["source"]] = counts.get(case["source"], 0) + 1
        names.append(case["name"])
    (directory / "schema.json").write_text(SCHEMA_FILE.read_text(encoding="utf-8"),
                                           encoding="utf-8")
    # enumerated_depth stays in the index (always 0) for readers of version 1.
    index = {"corpus_version": CORPUS_VERSION, "tiny_max_calls": max_calls,
             "enumerated_depth": 0, "counts": counts, "cases": names}
    (directory / "index.json").write_text(json.dumps(index, indent=1) + "\n",
                                          encoding="utf-8")
    return counts


def case_text(case: dict[str, Any]) -> str:
    """``json.dumps(case, indent=1)`` and a newline: a case's file, character for
    character. JSON's encoder writes indented output in Python, one generator per
    container (a third of writing the TINY cases); a case holds only dicts with string
    keys, lists, strings, ints, booleans and None, which are written here directly.
    Anything else (a float, say) goes to ``json.dumps``."""
    try:
        return _plain(case, "\n") + "\n"
    except _NotPlain:
        return json.dumps(case, indent=1) + "\n"


class _NotPlain(Exception):
    """A value :func:`_plain` leaves to ``json.dumps``."""


def _plain(value: object, newline: str) -> str:
    """``value`` as ``json.dumps(..., indent=1)`` writes it at the depth whose line
    break and indent is ``newline``."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    inner = newline + " "
    if type(value) is list:
        if not value:
            return "[]"
        return ("[" + inner + ("," + inner).join([_plain(item, inner) for item in value])
                + newline + "]")
    if type(value) is dict:
        if not value:
            return "{}"
        if any(type(key) is not str for key in value):
            raise _NotPlain
        return ("{" + inner + ("," + inner).join(
            [encode_basestring_ascii(key) + ": " + _plain(item, inner)
             for key, item in value.items()]) + newline + "}")
    raise _NotPlain


# --- the self-test's seeded variants -----------------------------------------------------

def selftest_cases(tries: int = SELFTEST_TRIES) -> Iterator[dict[str, Any]]:
    """For each seeded variant of ``kvoffload check --self-test``: the first example of
    the call generator (fixed seeds) it fails, shrunk; for the ARC variants random
    examples do not reach (``kills`` in ``corpus_modelcheck.json``), the model checker's
    shortest trace. Variants no example kills within ``tries`` give none."""
    kills = {k["variant"]: k for k in modelcheck_data()["kills"]}
    for entry in CATALOGUE:
        if entry.kind != "variant":
            continue
        kill = kills.get(entry.cls)
        if kill is not None and kill["policy"] == entry.policy.value:
            yield case_json(_selftest_name(entry), "selftest",
                            f"kills the seeded variant {entry.cls} ({entry.policy.value}, "
                            f"level {entry.level.value}): the first call on which it and "
                            f"the spec differ in a bounded refinement at TINY",
                            kill["capacity"], entry.policy,
                            [decode_call(c) for c in kill["calls"]])
            continue
        case = _killing_case(entry, tries)
        if case is not None:
            yield case


def _selftest_name(entry: Entry) -> str:
    return f"selftest-{entry.cls}-{entry.policy.value}-{entry.level.value}"


class _Driver:
    """The call generator's driver for one example: the lockstep on the variant."""

    def __init__(self, run: Lockstep) -> None:
        self.run = run

    @property
    def state(self) -> CacheState:
        return self.run.state

    def make(self, call: Call) -> object:
        return self.run.step(call)


def failures(prepared: Prepared, config: CheckConfig, seed: int,
             tries: int) -> Iterator[PropertyViolation]:
    """The failures of ``tries`` examples of the call generator (seeded from ``seed``;
    tiers of 1 to 4 slots) run in lockstep on the target, drain included."""
    rules = Rules.of(config, prepared.capabilities)
    rng = random.Random(seed)
    for _ in range(tries):
        capacity = rng.randint(1, 4)
        mix = rng.getrandbits(32)
        bursts = [rng.getrandbits(32) for _ in range(SELFTEST_BURSTS)]
        example = config.sized(capacity)
        try:
            run = Lockstep(construct(prepared.make_adapter, capacity, 0), example)
            calls = CallGenerator(rules, _Driver(run))
            calls.begin(capacity, mix)
            for x in bursts:
                calls.burst(x)
            run.drain(stale_completions=rules.stale)
            run.settle()
        except PropertyViolation as violation:
            violation.capacity = capacity
            yield violation


def _killing_case(entry: Entry, tries: int) -> dict[str, Any] | None:
    config = CheckConfig(policy=entry.policy, level=entry.level, adapter="native")
    from ..selftest import mutants

    prepared = prepare(entry.target, config, getattr(mutants, entry.cls))
    capacity = 1

    def case(calls: Sequence[Call]) -> dict[str, Any]:
        return case_json(_selftest_name(entry), "selftest",
                         f"kills the seeded variant {entry.cls} ({entry.policy.value}, "
                         f"level {entry.level.value})", capacity, entry.policy, calls)

    # What fails() said of each candidate: the shrinker's passes try some again (121
    # of the corpus's 1,028 replays), and a replay on a fresh target says the same.
    tried: dict[tuple[int, tuple[Call, ...]], bool] = {}

    def fails(calls: Sequence[Call]) -> bool:
        key = (capacity, tuple(calls))
        said = tried.get(key)
        if said is None:
            said = tried[key] = _fails(case(calls))
        return said

    def _fails(written: dict[str, Any]) -> bool:
        if written["level"] == "exact" and entry.level.value != "exact":
            return False  # replayers comparing with ``expect`` would skip it
        return isinstance(replay_case(written, prepared.make_adapter, config),
                          PropertyViolation)

    for found in failures(prepared, config, SELFTEST_SEED, tries):
        capacity = found.capacity
        calls = found.trace[:found.generated]
        if fails(calls):  # else it needs a victim choice before its last call: go on
            return case(shrink_calls(calls, fails))
    return None
