"""Shared fixtures for the proofs tests: the repository root on the path, cached runs.

``proofs/`` is a directory of tools run from the repository root, not an installed
package; ``python -m pytest`` already has the root on the path, plain ``pytest`` may not.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from proofs.modelcheck import cli, refinement, rumur  # noqa: E402 - after the root goes on sys.path
from proofs.modelcheck.bounds import PRESETS, Bounds  # noqa: E402 - after the root goes on sys.path
from proofs.modelcheck.checks import (  # noqa: E402 - after the root goes on sys.path
    CHECKS,
    CHECKS_BY_NAME,
    WIDE_TINY_ROWS,
    Check,
    laws_only,
)
from proofs.modelcheck.explorer import (  # noqa: E402 - after the root goes on sys.path
    Result,
    Setup,
    Shared,
    explore,
    family_of,
    liveness_of,
)
from proofs.modelcheck.node import Form  # noqa: E402 - after the root goes on sys.path

from kvoffload.spec import Assumption, Policy  # noqa: E402 - after the root goes on sys.path

RunCheck = Callable[..., Result]


EXPLORATIONS: Counter[tuple[str, str, bool]] = Counter()
"""How many times each (check, preset, alone) was explored this session: at most once."""


LIVENESS_TWIN = ":liveness"
"""A check named ``X:liveness`` checks liveness alone on the setup of check ``X``."""


@cache
def _explore_once(name: str, preset: str, alone: bool) -> Result:
    check = CHECKS_BY_NAME[name]
    twin = name.removesuffix(LIVENESS_TWIN)
    if not alone and twin != name and twin in CHECKS_BY_NAME:
        # The twin's search, when it held, went through the same nodes by the same
        # calls: liveness is read from its graph instead of searching them again.
        found = _explore_once(twin, preset, alone)
        if found.verdict == "holds":
            return liveness_of(check.setup, CHECKS_BY_NAME[twin].setup, found)
    EXPLORATIONS[name, preset, alone] += 1
    keep = not alone and name + LIVENESS_TWIN in CHECKS_BY_NAME
    setup, bounds = _setup(check, alone), PRESETS[preset]
    family = family_of(setup, bounds)
    wide = name in WIDE_TINY_ROWS  # the tier of the tests that read the check
    members = _FAMILIES.setdefault((family, preset, alone, wide), {
        c.name for c in CHECKS if preset in c.presets and (c.name in WIDE_TINY_ROWS) == wide
        and family_of(_setup(c, alone), bounds) == family})
    shared = _SHARED.get(family)
    if shared is None and len(members) > 1:  # the first of several searches of the family
        shared = _SHARED[family] = Shared(family)
    try:
        return explore(setup, bounds, keep_graph=keep, shared=shared)
    finally:
        members.discard(name)
        if not members:  # the family's last search: what it shared is not needed again
            _SHARED.pop(family, None)


def _setup(check: Check, alone: bool) -> Setup:
    return (laws_only(check) if alone else check).setup


_FAMILIES: dict[tuple[Hashable, str, bool, bool], set[str]] = {}
"""Per family of setups (:func:`family_of`), preset, mode and tier (the wide one or the
default one), the checks not yet explored. A family's searches share within one tier:
a tier makes none of the other's, so a family that counted them would keep what it
shared to the end of the session."""
_SHARED: dict[Hashable, Shared] = {}
"""What the searches of one family share (:class:`Shared`: the three TINY spec-arc checks
make the same 430,740 calls), kept until the family's last check was explored."""


def _run_check(name: str, preset: str = "tiny", alone: bool = False) -> Result:
    # One cache key per exploration however the call is spelt: functools.cache keys on
    # the arguments as passed, so run_check(n) and run_check(n, "tiny", False) would
    # each explore the check (every TINY check was explored twice that way).
    return _explore_once(name, preset, alone)


@pytest.fixture(scope="session")
def run_check() -> RunCheck:
    """``run_check(name, preset="tiny", alone=False)``: one exploration per check, preset
    and mode (``alone``: the laws alone, ``--laws-only``) per test session, shared by the
    tests that read its result."""
    return _run_check


@pytest.fixture(scope="session")
def explorations() -> Counter[tuple[str, str, bool]]:
    """The explorations ``run_check`` made this session, by (check, preset, alone)."""
    return EXPLORATIONS


_RUMUR_CHECK = rumur.check
QUICK_CFLAGS = ("-std=gnu11", "-O1", "-mcx16")
"""The tests read rumur's verdict and state count, which the optimisation level does not
change. TINY's verifier compiles in about 0.8 s of CPU at -O0, 1.2 s at -O1 and 2.5 s at
-O3, and runs in 0.27, 0.09 and 0.06 s: the build is kept between sessions
(:func:`_kept_verifier`), so each session pays the run, and a machine with an empty
cache the compile once."""


def _kept_verifier(cc: str, cflags: Sequence[str], folder: Path) -> None:
    """:func:`rumur.compile_verifier`'s program, built once per generated source,
    compiler and flags and kept between sessions (tests/cpp_build.py): rumur's generated
    C is the same for the same model and options, and its compile (about 0.9 s of CPU
    at -O0) was most of each row's time. What the test reads, rumur's verdict and state
    count, comes from running it, here as after a compile. A machine with an empty cache
    compiles each model once."""
    import shutil

    from cpp_build import kept_build

    kept = kept_build(cc, cflags, folder / "model.c", libraries=("-lpthread",),
                      folder="rumur-builds")
    shutil.copy2(kept, folder / "model")


@cache
def _rumur_once(bounds: Bounds, symmetry: str, threads: int, mutation: str | None,
                background: bool = False, node_failure: bool = False) -> rumur.RumurResult:
    return _RUMUR_CHECK(bounds, symmetry=symmetry, threads=threads, mutation=mutation,
                        background=background, node_failure=node_failure,
                        cflags=QUICK_CFLAGS, build=_kept_verifier)


def _rumur_check(bounds: Bounds, *, symmetry: str = "exhaustive", threads: int = 1,
                 mutation: str | None = None, background: bool = False,
                 node_failure: bool = False) -> rumur.RumurResult:
    return _rumur_once(bounds, symmetry, threads, mutation, background, node_failure)


@pytest.fixture
def rumur_check(monkeypatch: pytest.MonkeyPatch) -> Callable[..., rumur.RumurResult]:
    """``rumur.check`` with one generate, compile (kept between sessions) and run per
    model and bounds per test session; patched into :mod:`rumur` for the test, so the rows that
    ``cli.run_rumur`` reproduces share the runs ``test_rumur.py`` makes."""
    monkeypatch.setattr(rumur, "check", _rumur_check)
    return _rumur_check


_REFINE = refinement.refine


@cache
def _refine_once(bounds: Bounds, policy: Policy, form: Form,
                 assumptions: tuple[Assumption, ...]) -> refinement.RefinementResult:
    return _REFINE(bounds, policy, form, assumptions=assumptions)


def _refine(bounds: Bounds, policy: Policy, form: Form,
            factory: refinement.Factory = refinement.reference_manager,
            assumptions: tuple[Assumption, ...] = ()) -> refinement.RefinementResult:
    if factory is not refinement.reference_manager:
        return _REFINE(bounds, policy, form, factory, assumptions)
    return _refine_once(bounds, policy, form, assumptions)


@pytest.fixture
def refine_once(monkeypatch: pytest.MonkeyPatch) -> Callable[..., refinement.RefinementResult]:
    """``refinement.refine`` with one refinement of the reference manager per bounds,
    policy, form and assumptions per test session; patched into :mod:`cli` for the test,
    so the rows that ``cli.run_refinement`` reproduces share the refinements
    ``test_refinement.py`` makes (a planted manager is refined afresh each time)."""
    monkeypatch.setattr(cli, "refine", _refine)
    return _refine
