"""Run one check: build the machine for a target and configuration, let Hypothesis
explore and shrink, and gather the result (verdict, counterexample, what was checked)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, Verbosity, seed, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from ..adapter_api import Capabilities
from ..config import CheckConfig
from ..errors import PropertyViolation
from ..judge.explain import error_text
from ..judge.guard import Interrupted, timed_calls
from ..judge.machine import BURST, Counters, LockstepMachine, build_machine
from ..judge.properties import PROPERTIES
from ..judge.shrink import Shrunk, attempt, shrink
from ..target.isolation import mark_running
from ..target.remote import startup_seconds, target_session
from ..target.targets import Prepared, with_target_defaults
from .engine_script import EngineReproducer, engine_of, engine_reproducer
from .examples_db import database_settings
from .progress import Progress

if TYPE_CHECKING:
    from ..traffic.check import Pass
    from ..traffic.traces import Request

_run_machine: Callable[..., None] = run_state_machine_as_test
"""Hypothesis's runner, typed here: some Hypothesis releases leave it unannotated."""


@contextmanager
def _without_source_constants() -> Iterator[None]:
    """Hypothesis's own draws only, for as long as the run lasts.

    Hypothesis (from 6.131) sometimes draws an integer from the constants written in the
    source of every "local" module (neither stdlib nor site-packages) then in
    ``sys.modules``: what the process had imported (a test session's other modules, the
    user's own code, kvoffload itself when installed editable) changed the calls a seed
    makes, and "the same seed gives the same run" broke (seed 3 found TouchIgnored's bug
    alone and missed it beside tests/impl). The pool is emptied here, and the cache of
    constants filtered from it cleared on the way in and out, so no draw depends on it.
    Hypothesis has no setting for this: its internals are patched, the process's state
    put back after; where they are absent (older releases, no pool) nothing is done.
    Not thread safe: a Hypothesis test in another thread meanwhile draws without it too.
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # a Hypothesis laid out otherwise: no pool to empty
        yield
        return
    pool: Callable[[], Any] | None = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if pool is None or cache is None:
        yield
        return
    empty = Constants()
    cache.cache.clear()
    setattr(providers, "_get_local_constants", lambda: empty)  # noqa: B010  # private, set by name
    try:
        yield
    finally:
        setattr(providers, "_get_local_constants", pool)  # noqa: B010  # as above
        cache.cache.clear()


_DIGESTS: dict[object, bytes] = {}
"""Hypothesis's digests of the machine class and of its stateful test function, by
:func:`_digest_key` (see :func:`_digests_once`)."""


def _digest_key(function: Any) -> object:
    """What Hypothesis's digest of ``function`` depends on, for the two it digests in a
    run: a machine class of :func:`build_machine` (the source of :class:`LockstepMachine`,
    its signature), and Hypothesis's own stateful test function (its code, and the
    machine's digest added to it). None for anything else: digested every time."""
    if isinstance(function, type):  # build_machine's: found by the name of its base
        made = (function.__bases__ == (LockstepMachine,)
                and function.__qualname__ == LockstepMachine.__qualname__
                and function.__module__ == LockstepMachine.__module__)
        return LockstepMachine if made else None
    code = getattr(function, "__code__", None)
    if code is None or getattr(function, "__module__", None) != "hypothesis.stateful":
        return None
    return code, getattr(function, "_hypothesis_internal_add_digest", None)


@contextmanager
def _digests_once() -> Iterator[None]:
    """Hypothesis's digests of the machine computed once per process, for as long as the
    run lasts.

    Every round of every run hands Hypothesis a machine class of its own, and
    Hypothesis digests the class's source and that of its stateful test function
    (tokenizing both; the database key), about 10 ms a round, for the same bytes every
    time. They are kept here (:data:`_DIGESTS`), so the keys, and the examples a
    database replays, are those Hypothesis computes. Hypothesis's function is put back
    after; where it is laid out otherwise nothing is done. Not thread safe (as
    :func:`_without_source_constants`)."""
    from hypothesis import core, stateful

    digest: Callable[[Any], bytes] | None = getattr(stateful, "function_digest", None)
    shared = getattr(core, "function_digest", None) is digest  # one function, named twice
    if digest is None or not shared:
        yield
        return

    def once(function: Any) -> bytes:
        key = _digest_key(function)
        if key is None:
            return digest(function)
        kept = _DIGESTS.get(key)
        if kept is None:
            kept = _DIGESTS[key] = digest(function)
        return kept

    for module in (stateful, core):
        setattr(module, "function_digest", once)  # noqa: B010  # private, set by name
    try:
        yield
    finally:
        for module in (stateful, core):
            setattr(module, "function_digest", digest)  # noqa: B010  # as above


REPLAYS = 5
"""How often a shrunk trace is replayed before it is reported."""


@dataclass
class Failure:
    """One distinct failure of a run: a property, its shrunk violation, how it replays."""

    violation: PropertyViolation
    replays: int = 0
    reproduced: int = 0
    """Of ``replays`` replays of the shrunk trace, how many failed the same property."""
    found_after_s: float = 0.0
    found_trace_calls: int = 0
    unreliable: str | None = None
    """Why the run saw this failure not come back (Hypothesis's ``Flaky...`` error on
    replaying it); None if nothing did."""
    engine: EngineReproducer | None = None
    """Its engine-native reproducer and whether it showed the failure in a fresh process
    (engine targets, once :func:`add_engine_reproducers` ran)."""
    shrink_replays: int = 0
    """Replays the shrinker made (0: not shrunk)."""
    shrink_stopped: str | None = None
    """How shrinking was cut short, if it was: ``"replays"`` (its budget, the same on
    every machine) or ``"time"`` (the wall clock's safety net); see
    :class:`~kvoffload.conformance.judge.shrink.Shrunk`."""

    def shrunk(self, shrunk: Shrunk) -> None:
        """Take the shrinker's result as this failure's violation."""
        self.violation = shrunk.violation
        self.shrink_replays, self.shrink_stopped = shrunk.replays, shrunk.stopped

    @property
    def flaky(self) -> bool:
        """The shrunk trace did not fail on every replay, or the run saw it not come back."""
        return self.reproduced < self.replays or self.unreliable is not None


@dataclass
class CheckResult:
    """What one run found. ``verdict`` is "conforms", "fails" or "error"."""

    target: str
    adapter: str
    adapter_reason: str
    config: CheckConfig
    checked: tuple[str, ...]
    not_checked: dict[str, str]
    alphabet: dict[str, str]
    failures: list[Failure] = field(default_factory=list)
    """Every distinct failure, in the order found (one per property)."""
    error: str | None = None
    interrupted: bool = False
    """A Ctrl-C stopped the run before its budget was spent."""
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def violation(self) -> PropertyViolation | None:
        """The first failure's violation (None if none)."""
        return self.failures[0].violation if self.failures else None

    @property
    def violations(self) -> list[PropertyViolation]:
        return [f.violation for f in self.failures]

    @property
    def flaky(self) -> bool:
        return any(f.flaky for f in self.failures)

    @property
    def verdict(self) -> str:
        """A failure found is never lost: "fails" as soon as there is one, whatever error
        or interrupt came after it (``error`` is then reported beside it)."""
        if self.violation is not None:
            return "fails"
        if self.error is not None:
            return "error"
        return "interrupted" if self.interrupted else "conforms"

    def raise_if_failed(self) -> None:
        """Raise the violation (shrunk trace and table in its message), or a RuntimeError
        if the run did not finish; return quietly if the target conforms."""
        if self.violation is not None:
            raise self.violation
        if self.error is not None:
            raise RuntimeError(f"kvoffload check of {self.target} did not finish: {self.error}")


def coverage(prepared: Prepared, config: CheckConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(properties not checked, with why; calls generated or not, with why)."""
    caps: Capabilities = prepared.capabilities
    native = prepared.adapter == "native"
    not_checked: dict[str, str] = {}
    if not caps.events:
        not_checked["events"] = "the target has no take_events"
    if not native:
        not_checked["completion"] = "vLLM's completions return nothing"
        not_checked["epochs"] = "vLLM's API has no epochs"
    if not caps.completion_tickets:
        not_checked["tickets"] = "the target's plans carry no job tickets (vLLM's API)"
    if config.assumes("no-misuse"):
        not_checked["misuse"] = "assumed away (--assume no-misuse)"
    alphabet = {
        "lookup, prepare_store, complete_store (success and failure), prepare_load, "
        "complete_load": "generated",
        "touch": "generated" if caps.touch else "not generated: the target has no touch",
        "reset_cache": ("not generated: the target has no reset_cache" if not caps.reset else
                        "generated only when nothing is in flight (--assume no-reset-in-flight)"
                        if config.assumes("no-reset-in-flight") else
                        "generated, also with copies in flight"),
        "take_events": "generated" if caps.events else "not generated: no take_events",
        "duplicate keys in one call": "not generated (--assume unique-keys)"
        if config.assumes("unique-keys") else "generated",
        "misuse calls": "not generated (--assume no-misuse)" if config.assumes("no-misuse")
        else "generated: load of a non-READY key, unmatched complete_load",
        "stale completions": "not generated (--assume no-stale-completions)"
        if config.assumes("no-stale-completions") else
        "generated in " + ("both forms (ticket=, and vLLM's without one)"
                           if caps.completion_tickets else "vLLM's form (no ticket)")
        + ": late and duplicate completions of finished jobs"
        + (", of jobs from before a reset" if caps.reset else "")
        + (", naming a ticket never issued" if caps.completion_tickets else ""),
    }
    if config.injects_faults:
        alphabet["fail_node"] = (f"generated (--fault {config.fault}): a node of the target "
                                 f"is killed and replaced, the spec loses every block (D15)")
    return not_checked, alphabet


@timed_calls
def run_check(
    target: str,
    config: CheckConfig,
    obj: Any = None,
    show_progress: bool = False,
    label: str | None = None,
) -> CheckResult:
    """Check ``target`` under ``config``; raises UsageError if it cannot be checked.

    The target runs in a host process of its own (:mod:`kvoffload.conformance.target.remote`),
    unless ``obj`` is given or ``KVOFFLOAD_IN_PROCESS=1``: then in this process, unguarded.

    The run goes on past a failure: each failure is shrunk and replayed, then a new
    round starts (a seed of its own, the examples left) in which the properties already
    failed are no longer checked, until every checked property has failed or the
    budget is spent (``config.stop_at_first``: after the first failure).
    """
    config = with_target_defaults(target, config)  # lmcache==: one chunk per call
    with target_session(target, config, obj) as prepared:
        mark_running()  # loaded and built: from here, a process that dies fails the target
        result = _run(target, config, prepared, show_progress, label)
        host_start = startup_seconds(prepared)
        if host_start is not None:
            result.extra["host_start_s"] = round(host_start, 3)
        return result


def _run(target: str, config: CheckConfig, prepared: Prepared, show_progress: bool,
         label: str | None) -> CheckResult:
    if config.seed is None:
        config = replace(config, seed=random.SystemRandom().randrange(2**32))
    config = replace(config, adapter=prepared.adapter)
    not_checked, alphabet = coverage(prepared, config)
    result = CheckResult(
        target=target, adapter=prepared.adapter, adapter_reason=prepared.why, config=config,
        checked=tuple(p for p in PROPERTIES if p not in not_checked), not_checked=not_checked,
        alphabet=alphabet)
    if config.trace is not None:
        _run_trace(result, prepared, label or target, show_progress)
        return result
    counters = Counters()
    progress = Progress(label or target, config.max_examples, enabled=show_progress)
    progress.begin()
    start = time.perf_counter()
    while _explore(result, prepared, counters, progress, start):
        failed = {f.violation.prop for f in result.failures}
        if (config.stop_at_first or counters.examples >= config.max_examples
                or failed >= set(result.checked) or result.failures[-1].violation.timed_out
                or result.failures[-1].violation.host_ended):
            break
    result.examples, result.steps = counters.examples, counters.steps
    result.seconds = time.perf_counter() - start
    props = ", ".join(repr(f.violation.prop) for f in result.failures)
    progress.end(f"fails {'property' if len(result.failures) == 1 else 'properties'} "
                 f"{props}" if result.failures else result.verdict)
    return result


def _explore(result: CheckResult, prepared: Prepared, counters: Counters,
             progress: Progress, start: float) -> bool:
    """One round of Hypothesis over the examples left, the failed properties silenced;
    a failure found is shrunk, replayed and added. True when a failure was added."""
    config = result.config
    silenced = frozenset(f.violation.prop for f in result.failures)
    machine = build_machine(prepared.make_adapter, prepared.capabilities, config, counters,
                            progress.update, silenced)
    seeded = seed((config.seed or 0) + len(result.failures))
    options = settings(
        max_examples=config.max_examples - counters.examples,
        stateful_step_count=-(-config.steps // BURST),
        deadline=None, suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
        verbosity=Verbosity.quiet, print_blob=False, **database_settings(config, result.target))
    found: PropertyViolation | None = None
    unreliable: str | None = None
    counters.first, counters.first_error = None, None
    try:
        with _without_source_constants(), _digests_once():
            _run_machine(seeded(machine), settings=options)
    except PropertyViolation as violation:
        found = violation
    except Interrupted:
        result.interrupted = True
        found = counters.first
    except Exception as error:  # Flaky..., a target that breaks Hypothesis, a suite bug
        found, unreliable = _kept(error, counters, result)
    if found is None or found.prop in silenced:
        return False
    failure = Failure(found, found_after_s=round(time.perf_counter() - start, 3),
                      found_trace_calls=len(found.trace), unreliable=unreliable)
    result.failures.append(failure)
    if len(result.failures) == 1:
        result.extra["found_after_s"] = failure.found_after_s
        result.extra["found_trace_calls"] = failure.found_trace_calls
    if result.interrupted:
        return False
    try:
        failure.shrunk(shrink(prepared.make_adapter, config, found, silenced=silenced))
        _replay(failure, prepared, config, silenced)
    except Interrupted:
        result.interrupted = True
        return False
    except Exception as error:  # the target broke while its failure was shrunk or replayed
        result.error = result.error or error_text(error)
    return result.error is None  # after an error, the failure is reported, the error beside it


def _run_trace(result: CheckResult, prepared: Prepared, label: str,
               show_progress: bool) -> None:
    """``--trace``: a pass over the trace in lockstep; a failure is shrunk (the shortest
    failing window, then the shrinker) and replayed, and, as the random runs do, the
    next pass goes on with the properties already failed silenced, until a pass ends
    clean, every checked property has failed, or ``--stop-at-first``
    (:mod:`kvoffload.conformance.traffic.check`)."""
    from ..errors import UsageError
    from ..traffic.check import load_trace, play, trace_alphabet
    from ..traffic.traces import TraceError

    config = result.config
    try:
        requests = load_trace(config.trace or "")
    except TraceError as error:  # a file that breaks the format: the run cannot be made
        raise UsageError(str(error)) from None
    caps = prepared.capabilities
    result.alphabet = trace_alphabet(caps, config.trace or "")
    counters = Counters()
    progress = Progress(label, len(requests), enabled=show_progress, unit="requests")
    progress.begin()
    start = time.perf_counter()
    cpu = time.process_time()

    def served(tally: Any) -> None:
        counters.examples, counters.steps = tally.requests, steps + tally.calls
        progress.update(counters)

    steps, passes = 0, 0
    try:
        while True:
            silenced = frozenset(f.violation.prop for f in result.failures)
            counters.failures = 0
            done = play(prepared.make_adapter, caps, config, requests, silenced=silenced,
                        on_request=served)
            passes, steps = passes + 1, steps + done.tally.calls
            result.extra.setdefault("trace", {  # the first pass's
                "trace_requests": len(requests), "requests": done.tally.requests,
                "calls": done.tally.calls,
                "lookups": done.tally.lookups, "pending": done.tally.pending,
                "loads": done.tally.loads, "stores": done.tally.stores,
                "rejected": done.tally.rejected})
            found = done.violation
            if found is None or found.prop in silenced:
                break
            counters.failures = 1
            progress.update(counters)
            if not _trace_failure(result, prepared, requests, done, silenced, start):
                break
    except Interrupted:
        result.interrupted = True
    except Exception as error:  # the target broke (a host that died, say): reported
        result.error = result.error or error_text(error)
    result.examples, result.steps = passes, steps
    result.seconds = time.perf_counter() - start
    result.extra["cpu_s"] = round(time.process_time() - cpu, 3)
    props = ", ".join(repr(f.violation.prop) for f in result.failures)
    progress.end(f"fails {'property' if len(result.failures) == 1 else 'properties'} "
                 f"{props}" if result.failures else result.verdict)


def _trace_failure(result: CheckResult, prepared: Prepared, requests: Sequence[Request],
                   done: Pass, silenced: frozenset[str], start: float) -> bool:
    """Add the failure of a trace pass ``done``, shrunk (the shortest failing window,
    then the shrinker) and replayed; True if another pass should follow."""
    from ..traffic.check import shrink_trace_failure

    config, found = result.config, done.violation
    if found is None:
        raise ValueError("_trace_failure needs a pass that failed")
    failure = Failure(found, found_after_s=round(time.perf_counter() - start, 3),
                      found_trace_calls=len(found.trace))
    result.failures.append(failure)
    shrunk, facts = shrink_trace_failure(
        prepared.make_adapter, prepared.capabilities, config, requests, done, silenced)
    failure.shrunk(shrunk)
    result.extra.setdefault("windows", []).append({"property": found.prop, **facts})
    _replay(failure, prepared, config, silenced)
    failed = {f.violation.prop for f in result.failures}
    return not (config.stop_at_first or failed >= set(result.checked)
                or found.timed_out or found.host_ended)


def _kept(error: Exception, counters: Counters,
          result: CheckResult) -> tuple[PropertyViolation | None, str | None]:
    """What a round that ended on ``error`` found, never lost: the violation the error
    holds, else the first one the round raised; and, for Hypothesis's ``Flaky...``
    errors on a target whose answers change from run to run, why it is flaky. Any other
    error goes into ``result.error``: the target's own where Hypothesis's hides it (a
    constructor that raised), beside the failure if there is one."""
    found = _violation_in(error) or counters.first
    cause = counters.first_error
    if found is not None and isinstance(error, Flaky) and cause is None:
        return found, f"it did not come back when Hypothesis replayed it ({type(error).__name__})"
    result.error = error_text(error if cause is None else cause)
    return found, None


def _violation_in(error: BaseException) -> PropertyViolation | None:
    """The first PropertyViolation inside an exception group (a FlakyFailure holds the
    failures Hypothesis saw), else None."""
    for inner in getattr(error, "exceptions", ()):
        if isinstance(inner, PropertyViolation):
            return inner
    return None


def _replay(failure: Failure, prepared: Prepared, config: CheckConfig,
            silenced: frozenset[str]) -> None:
    """Replay the shrunk trace REPLAYS times: a failure that does not come back every
    time is reported flaky, with how often it did."""
    violation = failure.violation
    calls = violation.trace[:violation.generated]
    shrunk_config = config.sized(violation.capacity)
    failure.replays = REPLAYS
    failure.reproduced = sum(
        1 for _ in range(REPLAYS)
        if (v := attempt(prepared.make_adapter, shrunk_config, calls, violation.in_drain,
                         silenced))
        is not None and v.prop == violation.prop)


def add_engine_reproducers(result: CheckResult) -> None:
    """Give each failure of an engine target (``lmcache==``, ``vllm==``) its
    engine-native reproducer, run in a fresh process (:mod:`.engine_script`). A failure
    whose script does not show it stays a failure, marked not reproduced outside
    kvoffload; a script that could not be made says why in its output."""
    if engine_of(result.target) is None:
        return
    for failure in result.failures:
        try:
            failure.engine = engine_reproducer(result.target, result.config, failure.violation)
        except Exception as error:  # the record could not be made: say so, never blame
            failure.engine = EngineReproducer("", False, None, f"no engine-native reproducer "
                                              f"could be made: {error_text(error)}", 0.0)
