"""The recorded results of proofs/README.md reproduce: verdicts and state counts.

Times are recorded for the reader and never compared. TINY rows run here; the SMALL
rows, the ARC refinement rows, the laws-alone rows of spec-arc and of vLLM's form, and
CrossHair are in the slow tier.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest
from proofs.modelcheck import cli, table
from proofs.modelcheck.bounds import PRESETS, TINY
from proofs.modelcheck.checks import (
    CHECKS_BY_NAME,
    LAWS_ROWS,
    SLOW_LAWS_ROWS,
    SLOW_TINY_ROWS,
    WIDE_TINY_ROWS,
)
from proofs.modelcheck.explorer import Result
from proofs.modelcheck.mutants import MUTANTS

from kvoffload.spec import INVARIANTS
from kvoffload.spec.laws import LAW_NAMES

INVARIANT_NAMES = tuple(inv.__name__ for inv in INVARIANTS)

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""

ROWS = [r for r in table.read() if r.result != cli.NOT_RERUN]
"""The recorded rows; a row that says it was not rerun since the spec changed has no
figures to compare."""


def _name(row: table.Row) -> str:
    return row.command.split("--check ")[1].split()[0]


def _alone(row: table.Row) -> bool:
    """Was the row run with the laws alone (``--laws-only``)?"""
    return row.command.endswith(cli.LAWS_ONLY)


CHECK_ROWS = [r for r in ROWS if "--check " in r.command]
TINY_ROWS = [r for r in CHECK_ROWS if "--preset tiny" in r.command]
SMALL_ROWS = [r for r in CHECK_ROWS if "--preset small" in r.command]
RUMUR_ROWS = [r for r in ROWS if "--rumur" in r.command]
REFINEMENT_ROWS = [r for r in ROWS if "--refinement" in r.command]


def test_every_tiny_check_has_a_row() -> None:
    recorded = {_name(r) for r in TINY_ROWS if not _alone(r)}
    assert recorded == {c.name for c in CHECKS_BY_NAME.values() if "tiny" in c.presets}
    assert {_name(r) for r in SMALL_ROWS if not _alone(r)} == {
        c.name for c in CHECKS_BY_NAME.values() if "small" in c.presets}


def test_the_laws_rows_are_recorded() -> None:
    """Each check of LAWS_ROWS has its --laws-only row at its preset: the spec's hold
    (the transitions satisfy every law), the mutants' are violated."""
    recorded = {(_name(r), r.command.split("--preset ")[1].split()[0])
                for r in CHECK_ROWS if _alone(r)}
    assert recorded == set(LAWS_ROWS)
    for row in CHECK_ROWS:
        if _alone(row) and not _name(row).startswith("mutant:"):
            assert row.result == "holds", row.command


def test_every_mutant_is_recorded_caught_twice() -> None:
    """Each spec mutant has two TINY rows, both violated: caught by the comparison with
    the spec, and caught by the laws alone (``--laws-only``)."""
    for m in MUTANTS:
        rows = [r for r in TINY_ROWS if _name(r) == f"mutant:{m.name}"]
        assert sorted(_alone(r) for r in rows) == [False, True], m.name
        assert all(r.result.startswith("violated: ") for r in rows), m.name
        by_laws = next(r for r in rows if _alone(r)).result
        assert by_laws.split()[1] in LAW_NAMES + INVARIANT_NAMES, by_laws


def _tiny_param(row: table.Row) -> object:
    slow = (_alone(row) and _name(row) in SLOW_LAWS_ROWS) or _name(row) in SLOW_TINY_ROWS
    wide = not slow and _name(row) in WIDE_TINY_ROWS
    return pytest.param(row, marks=[pytest.mark.slow] if slow else [pytest.mark.wide] if wide
                        else [],
                        id=_name(row) + (" --laws-only" if _alone(row) else ""))


@pytest.mark.parametrize("row", [_tiny_param(r) for r in TINY_ROWS])
def test_tiny_row_reproduces(row: table.Row, run_check: RunCheck) -> None:
    name = _name(row)
    alone = _alone(row)
    again = cli.check_row(CHECKS_BY_NAME[name], TINY, run_check(name, "tiny", alone), alone)
    assert again.command == row.command
    assert (again.result, again.states) == (row.result, row.states)


@pytest.mark.slow
@pytest.mark.parametrize("row", SMALL_ROWS,
                         ids=[_name(r) + (" --laws-only" if _alone(r) else "") for r in SMALL_ROWS])
def test_small_row_reproduces(row: table.Row, run_check: RunCheck) -> None:
    name = _name(row)
    alone = _alone(row)
    again = cli.check_row(CHECKS_BY_NAME[name], PRESETS["small"],
                          run_check(name, "small", alone), alone)
    assert again.command == row.command
    assert (again.result, again.states) == (row.result, row.states)


def _rumur_params(row: table.Row) -> list[object]:
    preset = row.command.split("--preset ")[1].split()[0]
    mutation = row.command.split("--mutation ")[1] if "--mutation" in row.command else None
    marks = [pytest.mark.skipif(shutil.which("rumur") is None,
                                reason="rumur is not installed (apt-get install -y rumur)")]
    if preset != "tiny":
        marks.append(pytest.mark.slow)
    setting = "".join(f"-{flag}" for flag in ("background-eviction", "node-failure")
                      if f"--{flag}" in row.command)
    return [pytest.param(row, preset, mutation, marks=marks,
                         id=f"{preset}-{mutation}{setting}")]


@pytest.mark.parametrize(("row", "preset", "mutation"),
                         [p for r in RUMUR_ROWS for p in _rumur_params(r)])
@pytest.mark.usefixtures("rumur_check")  # shares test_rumur.py's runs
def test_rumur_row_reproduces(row: table.Row, preset: str, mutation: str | None) -> None:
    again = cli.run_rumur(PRESETS[preset], mutation,
                          background="--background-eviction" in row.command,
                          node_failure="--node-failure" in row.command).row
    assert (again.result, again.states) == (row.result, row.states)


def _refinement_params(row: table.Row) -> object:
    name = row.command.split("--refinement ")[1].split()[0]
    marks = [pytest.mark.slow] if name.startswith("arc") or name.endswith("vllm") else []
    return pytest.param(row, name, marks=marks, id=name)


@pytest.mark.parametrize(("row", "name"), [_refinement_params(r) for r in REFINEMENT_ROWS])
@pytest.mark.usefixtures("refine_once")  # shares test_refinement.py's refinements
def test_refinement_row_reproduces(row: table.Row, name: str) -> None:
    again = cli.run_refinement(name, TINY).row
    assert (again.result, again.states) == (row.result, row.states)
