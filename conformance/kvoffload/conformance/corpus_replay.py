"""``kvoffload corpus replay DIR TARGET``: replay the corpus's cases against one target.

A native target (``docs/native-api.md``: kvoffload's own API, the reference manager
and its seeded variants) is driven directly, tickets included. Any other TARGET
(``vllm==X``, ``lmcache==X``, a vLLM class) goes through the same adapter ``kvoffload
check`` builds for it; cases whose completions name a ticket are skipped there (those
APIs have no job names), and what an adapter cannot see (a completion's answer, a
rejection's shortfall, a reset's epoch) is not compared.

Exit codes as ``kvoffload check``: 0 every replayed case passed, 1 some case failed,
2 the replay could not run (bad corpus, unloadable target, bad option).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvoffload.spec import (
    Call,
    Completion,
    LookupResult,
    MalformedCall,
    Op,
)
from kvoffload.spec.calls import send

from . import explain as ex
from .adapter_api import RETRY, Adapter, EventBatch, LoadOutcome, StoreOutcome, read_int
from .config import CheckConfig, Level, Profile
from .corpus import NEVER_ISSUED, load_cases
from .errors import TargetLoadError, Untranslatable, UsageError
from .isolation import mark_running
from .native import NATIVE_METHODS, NativeAdapter
from .targets import DEFAULT_TARGET, load_object, prepare, with_target_defaults


class CaseFailed(Exception):
    """A target's answer broke a case's expectation (the message says which)."""


@dataclass
class Outcome:
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, int, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def applies(case: dict[str, Any], config: CheckConfig) -> str | None:
    """Why ``case`` is skipped under ``config`` (None: it is replayed)."""
    if case["level"] == "exact" and (config.level is not Level.EXACT
                                     or case["policy"] != config.policy.value):
        return f"needs --level exact --policy {case['policy']}"
    excluded = set(case["excluded_by"]) & set(config.assume)
    if excluded:
        return "assumed away: " + ", ".join(sorted(excluded))
    if config.max_keys_per_call and any(
            len(s["call"].get("keys", ())) > config.max_keys_per_call for s in case["steps"]):
        return f"a call names more than {config.max_keys_per_call} keys"
    return None


class _Bindings:
    """Slot and ticket names bound at first sight, with the case's constraints."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.slots: dict[str, int] = {}
        self.tickets: dict[str, int] = {}
        self.epoch = 0
        """The reset epoch a plan made now starts in: 0, then each reset's."""
        self.held: list[str] = []
        """Slot names held once the current step is done (the case's ``held``)."""
        self.policy_matches = True
        """Is the target checked at the case's policy? (If not, a victim is checked
        against ``evicted_from`` even at level exact: another policy's exact victim is
        not this target's.)"""

    def slot(self, name: str, value: int) -> None:
        if name in self.slots:
            if self.slots[name] != value:
                raise CaseFailed(f"slot {name} is {self.slots[name]}, the target gave {value}")
            return
        if not 0 <= value < self.capacity:
            raise CaseFailed(f"slot {value} for {name} is outside 0..{self.capacity - 1}")
        taken = [n for n in self.held if self.slots.get(n) == value]
        if taken:
            raise CaseFailed(f"slot {value} for {name} is still held by {taken[0]}")
        self.slots[name] = value

    def ticket(self, name: str, value: object) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise CaseFailed(f"ticket {value!r} for {name} is not an int")
        if value in self.tickets.values():
            raise CaseFailed(f"ticket {value} for {name} was issued before")
        self.tickets[name] = value

    def ticket_value(self, name: str) -> int:
        if name in self.tickets:
            return self.tickets[name]
        if name != NEVER_ISSUED:
            raise CaseFailed(f"ticket name {name} is used before any plan issued it")
        return max(self.tickets.values(), default=0) + 1_000_003


def _keys(data: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(data.get("keys", ()))


def _victims(expect: dict[str, Any], got: Sequence[Any], level: Level,
             names: _Bindings) -> None:
    """Exactly the spec's victims, or at level any (where the case lists them) as many
    distinct victims from ``evicted_from``, whose slots are then free, not the spec's."""
    allowed = expect.get("evicted_from")
    if (level is Level.EXACT and names.policy_matches) or allowed is None:
        _same(expect["evicted"], got, "evicted")
        return
    chosen = set(map(repr, got))
    if len(chosen) != len(got) or len(got) != len(expect["evicted"]) \
            or not chosen <= set(map(repr, allowed)):
        raise CaseFailed(f"evicted: {len(expect['evicted'])} distinct of {allowed}; the "
                         f"target evicted {list(got)}")
    slot_of = dict(zip(map(repr, allowed), expect["evicted_from_slots"], strict=True))
    held = set(names.held) | {slot_of[repr(k)] for k in expect["evicted"]}
    names.held = sorted(held - {slot_of[k] for k in chosen})


def _same(expected: Sequence[Any], got: Sequence[Any], what: str) -> None:
    if set(map(repr, expected)) != set(map(repr, got)) or len(expected) != len(got):
        raise CaseFailed(f"{what}: expected {list(expected)}, the target gave {list(got)}")


def _lookup(expected: str, got: Any, profile: Profile) -> None:
    name = "PENDING" if got is RETRY else getattr(got, "name", repr(got))
    if name == expected or (expected == "PENDING" and profile is Profile.SAFE
                            and got is LookupResult.MISS):
        return
    raise CaseFailed(f"lookup must answer {expected} ({profile.value} profile); the target "
                     f"answered {name}")


class AdapterDriver:
    """A target through the adapter ``kvoffload check`` uses for it: every answer is
    read by that adapter (for a native target, :class:`~.native.NativeAdapter`'s strict
    reading), then compared with the case. What the adapter reports (a completion's
    answer, a rejection's shortfall, a reset's epoch, the plans' tickets) is compared;
    what it cannot see (None) is not."""

    policy: str | None = None
    """The policy the target is checked at (None: whatever the case says)."""

    def __init__(self, adapter: Adapter, profile: Profile, level: Level = Level.ANY) -> None:
        self.adapter = adapter
        self.profile = profile
        self.level = level
        self.subscriber: set[Any] = set()

    @property
    def tickets(self) -> bool:
        """Does the target's API name jobs (completions in the ticket form)?"""
        return self.adapter.capabilities.completion_tickets

    def lacks(self) -> set[str]:
        caps = self.adapter.capabilities
        return {op for op, has in (("touch", caps.touch), ("reset_cache", caps.reset),
                                   ("take_events", caps.events)) if not has}

    def step(self, call: dict[str, Any], expect: dict[str, Any], names: _Bindings) -> None:
        a, op = self.adapter, call["op"]
        named = "ticket" in call and self.tickets  # else the call goes in vLLM's form
        ticket = names.ticket_value(call["ticket"]) if named else None
        try:
            made = Call(Op(op), _keys(call), success=call.get("success", True), ticket=ticket)
        except (ValueError, MalformedCall) as error:
            raise CaseFailed(f"the case's call {call} is not a call of the API: {error}") from error
        try:
            out = send(a, made)
        except Untranslatable as error:  # an answer of the wrong shape or type
            raise CaseFailed(f"{op}: {error} [{error.prop}]") from error
        except Exception as error:
            if expect["kind"] == "error" and a.is_rejection(error):
                self._check_family(op, error, expect["family"])
                return
            raise CaseFailed(f"{op} raised {ex.error_text(error)}; expected "
                             f"{expect['kind']}") from error
        if expect["kind"] == "error":
            raise CaseFailed(f"{op} must be rejected with [{expect['family']}]; the target "
                             "accepted it")
        self._check(expect, out, names)

    def _check_family(self, op: str, error: BaseException, family: str) -> None:
        """A rejection must be the one the case calls for (its family: the misuse code)."""
        if not self.adapter.capabilities.rejects_with(error, family):
            raise CaseFailed(f"{op} raised {ex.error_text(error)}; expected [{family}]")

    def _check(self, expect: dict[str, Any], out: Any, names: _Bindings) -> None:
        kind = expect["kind"]
        if kind == "lookup":
            _lookup(expect["result"], out, self.profile)
        elif kind in ("store_plan", "rejected"):
            if not isinstance(out, StoreOutcome):
                raise TypeError("adapter returned a non-StoreOutcome")
            if kind == "rejected":
                if out.accepted:
                    raise CaseFailed(f"prepare_store must be rejected; the target stored "
                                     f"{list(out.keys)}, evicting {list(out.evicted)}")
                reported = (out.needed, out.available)
                if None not in reported and reported != (expect["needed"], expect["available"]):
                    raise CaseFailed(f"rejection needed/available: expected {expect['needed']}/"
                                     f"{expect['available']}, got {out.needed}/{out.available}")
                return
            if not out.accepted:
                raise CaseFailed("prepare_store must be accepted; the target rejected it")
            _in_order(expect["keys"], out.keys, "keys to store")
            _victims(expect, out.evicted, self.level, names)
            _bind_slots(expect["slots"], out.slots, names, "prepare_store")
            _epoch(out.epoch, names, "prepare_store")
            self._ticket(expect, out.ticket, names)
        elif kind == "load_plan":
            if not isinstance(out, LoadOutcome):
                raise TypeError("adapter returned a non-LoadOutcome")
            if out.keys is not None:
                _in_order(expect["keys"], out.keys, "keys to load")
            _bind_slots(expect["slots"], out.slots, names, "prepare_load")
            _epoch(out.epoch, names, "prepare_load")
            self._ticket(expect, out.ticket, names)
        elif kind == "completion" and isinstance(out, Completion):
            for part in ("applied", "released", "ignored"):
                _same(expect[part], getattr(out, part), part)
        elif kind == "events" and isinstance(out, EventBatch):
            broken = out.not_net_text(self.subscriber)
            if broken:
                raise CaseFailed(broken)
            out.replay_onto(self.subscriber)
            _same(expect["ready"], tuple(self.subscriber), "the subscriber's READY set")
        elif kind == "reset":
            if out is not None and out != expect["epoch"]:
                raise CaseFailed(f"reset_cache must return epoch {expect['epoch']}; got {out!r}")
            names.epoch = expect["epoch"]

    def _ticket(self, expect: dict[str, Any], ticket: int | None, names: _Bindings) -> None:
        """Bind the plan's ticket name (where the API names jobs and reports one)."""
        if self.tickets and ticket is not None:
            names.ticket(expect["ticket"], ticket)


class NativeDriver(AdapterDriver):
    """A manager offering the native API (``docs/native-api.md``), tickets included,
    read strictly by :class:`~.native.NativeAdapter` as ``kvoffload check`` reads it."""

    def __init__(self, manager: Any, profile: Profile, level: Level = Level.ANY) -> None:
        super().__init__(NativeAdapter(manager), profile, level)


def _epoch(epoch: int | None, names: _Bindings, what: str) -> None:
    """A plan's epoch, where the API reports one, is the current one (the last
    reset's, 0 before any)."""
    if epoch is not None and epoch != names.epoch:
        raise CaseFailed(f"{what}'s plan must start in epoch {names.epoch}; the target "
                         f"gave {epoch!r}")


def _in_order(expected: Sequence[Any], got: Sequence[Any], what: str) -> None:
    if list(map(repr, expected)) != list(map(repr, got)):
        raise CaseFailed(f"{what} in call order: expected {list(expected)}, the target gave "
                         f"{list(got)}")


def _bind_slots(expected: Sequence[str], got: Sequence[Any], names: _Bindings,
                what: str) -> None:
    """Bind each expected slot name to the slot the target gave, after checking it gave
    as many (a plan with more or fewer slots fails the case; it does not crash it)."""
    if len(got) != len(expected):
        raise CaseFailed(f"{what} must give {len(expected)} slot(s); the target gave "
                         f"{len(got)}: {list(got)}")
    for name, value in zip(expected, got, strict=True):
        try:  # an adapter's slots are ints already; one that is not fails the case
            slot = read_int(value, "slots", "slot")
        except Untranslatable as error:
            raise CaseFailed(f"{what}: {error} [{error.prop}]") from error
        names.slot(name, slot)


def _is_native(obj: Any) -> bool:
    return all(callable(getattr(obj, m, None)) for m in NATIVE_METHODS)


def make_driver(target: str, config: CheckConfig) -> Callable[[int], Any]:
    """A function building a fresh driver (one target instance) of a given capacity."""
    if not target.startswith(("vllm==", "lmcache==")) and config.adapter in ("auto", "native"):
        obj = load_object(target, config.policy.value)
        takes_policy = "policy" in str(_signature(obj))
        policy = {"policy": config.policy.value} if takes_policy else {}
        probe = obj(1, **policy)
        if _is_native(probe):
            def native(capacity: int) -> NativeDriver:
                driver = NativeDriver(obj(capacity, **policy), config.profile, config.level)
                driver.policy = config.policy.value
                return driver
            return native
    prepared = prepare(target, config)

    def adapted(capacity: int) -> AdapterDriver:
        driver = AdapterDriver(prepared.make_adapter(capacity), config.profile, config.level)
        driver.policy = config.policy.value
        return driver
    return adapted


def _signature(obj: Any) -> object:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return ""


def replay_case(case: dict[str, Any], build: Callable[[int], Any]) -> tuple[int, str] | None:
    """Replay one case; (step number, why) at its first broken expectation, else None."""
    driver = build(case["capacity"])
    names = _Bindings(case["capacity"])
    names.policy_matches = (getattr(driver, "policy", None) or case["policy"]) == case["policy"]
    for number, step in enumerate(case["steps"], 1):
        names.held = list(step["held"])  # a new slot may reuse one this call freed
        try:
            driver.step(step["call"], step["expect"], names)
        except CaseFailed as failed:
            return number, str(failed)
    return None


def replay_corpus(directory: Path, target: str, config: CheckConfig) -> Outcome:
    cases = load_cases(directory)
    build = make_driver(target, config)
    sample = build(1)
    mark_running()  # loaded and built: from here, a process that dies fails the target
    lacks = sample.lacks()
    outcome = Outcome()
    for case in cases:
        why = applies(case, config)
        missing = sorted(lacks & {s["call"]["op"] for s in case["steps"]})
        if why is None and missing:
            why = "the target has no " + ", ".join(missing)
        if why is None and not sample.tickets and any("ticket" in s["call"] for s in case["steps"]):
            why = "completions name a ticket; this target's API has none"
        if why is not None:
            outcome.skipped[why] = outcome.skipped.get(why, 0) + 1
            continue
        failed = replay_case(case, build)
        if failed is None:
            outcome.passed.append(case["name"])
        else:
            outcome.failed.append((case["name"], *failed))
    return outcome


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="corpus_command", required=True)
    write = sub.add_parser("write", help="write the corpus (JSON cases, schema, index)")
    write.add_argument("directory", type=Path)
    write.add_argument("--max-calls", type=int, default=6,
                       help="the model checker's TINY traces of up to this many calls "
                       "(0 to 6, default 6)")
    write.add_argument("--depth", type=int, default=0,
                       help="also every call sequence of up to this many calls at TINY, "
                       "not deduplicated by state (default 0: none; 3 gives 10,759)")
    replay = sub.add_parser("replay", help="replay a corpus against TARGET")
    replay.add_argument("directory", type=Path)
    replay.add_argument("target", nargs="?", default=DEFAULT_TARGET)
    replay.add_argument("--adapter", default="auto")
    replay.add_argument("--profile", choices=[p.value for p in Profile], default="strict")
    replay.add_argument("--policy", choices=["lru", "arc"], default="lru")
    replay.add_argument("--level", choices=[lv.value for lv in Level], default="any")
    replay.add_argument("--assume", action="append", default=[], metavar="NAME")
    replay.add_argument("--max-keys-per-call", default=None, metavar="N")
    replay.add_argument("--show", type=int, default=10, help="failures to print (default 10)")


def run_corpus_command(args: argparse.Namespace) -> int:
    from .corpus import write_corpus

    try:
        if args.corpus_command == "write":
            if args.depth < 0:
                raise UsageError("--depth must be 0 or more")
            if not 0 <= args.max_calls <= 6:
                raise UsageError("--max-calls must be 0 to 6 (the model checker's traces "
                                 "are written up to 6 calls)")
            counts = write_corpus(args.directory, args.depth, max_calls=args.max_calls)
            print(f"wrote {sum(counts.values())} cases to {args.directory}: "
                  + ", ".join(f"{n} {source}" for source, n in counts.items()))
            return 0
        config = CheckConfig.from_options(
            profile=args.profile, policy=args.policy, level=args.level, assume=args.assume,
            adapter=args.adapter, max_keys_per_call=args.max_keys_per_call)
        config = with_target_defaults(args.target, config)  # lmcache==: one chunk per call
        outcome = replay_corpus(args.directory, args.target, config)
    except (UsageError, TargetLoadError) as error:
        print(f"kvoffload corpus: error: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as error:
        print(f"kvoffload corpus: error: cannot read the corpus: {error}", file=sys.stderr)
        return 2
    print(f"{len(outcome.passed)} passed, {len(outcome.failed)} failed, "
          f"{sum(outcome.skipped.values())} skipped")
    for why, count in sorted(outcome.skipped.items()):
        print(f"  skipped {count}: {why}")
    for name, step, why in outcome.failed[:args.show]:
        print(f"FAILED {name} at step {step}: {why}")
    return 1 if outcome.failed else 0
