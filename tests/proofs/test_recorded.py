"""The recorded results of proofs/README.md reproduce: verdicts and state counts.

Times are recorded for the reader and never compared. TINY rows run here; the SMALL
rows, the ARC refinement rows and CrossHair are in the slow tier.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest
from proofs.modelcheck import cli, table
from proofs.modelcheck.bounds import PRESETS, TINY
from proofs.modelcheck.checks import CHECKS_BY_NAME
from proofs.modelcheck.explorer import Result

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""

ROWS = [r for r in table.read() if r.result != cli.NOT_RERUN]
"""The recorded rows; a row that says it was not rerun since the spec changed has no
figures to compare."""


def _name(row: table.Row) -> str:
    return row.command.split("--check ")[1].split()[0]


CHECK_ROWS = [r for r in ROWS if "--check " in r.command]
TINY_ROWS = [r for r in CHECK_ROWS if r.command.endswith("--preset tiny")]
SMALL_ROWS = [r for r in CHECK_ROWS if r.command.endswith("--preset small")]
RUMUR_ROWS = [r for r in ROWS if "--rumur" in r.command]
REFINEMENT_ROWS = [r for r in ROWS if "--refinement" in r.command]


def test_every_tiny_check_has_a_row() -> None:
    recorded = {_name(r) for r in TINY_ROWS}
    assert recorded == {c.name for c in CHECKS_BY_NAME.values() if "tiny" in c.presets}
    assert {_name(r) for r in SMALL_ROWS} == {
        c.name for c in CHECKS_BY_NAME.values() if "small" in c.presets}


@pytest.mark.parametrize("row", TINY_ROWS, ids=[_name(r) for r in TINY_ROWS])
def test_tiny_row_reproduces(row: table.Row, run_check: RunCheck) -> None:
    name = _name(row)
    again = cli.check_row(CHECKS_BY_NAME[name], TINY, run_check(name))
    assert (again.result, again.states) == (row.result, row.states)


@pytest.mark.slow
@pytest.mark.parametrize("row", SMALL_ROWS, ids=[_name(r) for r in SMALL_ROWS])
def test_small_row_reproduces(row: table.Row, run_check: RunCheck) -> None:
    name = _name(row)
    again = cli.check_row(CHECKS_BY_NAME[name], PRESETS["small"], run_check(name, "small"))
    assert (again.result, again.states) == (row.result, row.states)


def _rumur_params(row: table.Row) -> list[object]:
    preset = row.command.split("--preset ")[1].split()[0]
    mutation = row.command.split("--mutation ")[1] if "--mutation" in row.command else None
    marks = [pytest.mark.skipif(shutil.which("rumur") is None,
                                reason="rumur is not installed (apt-get install -y rumur)")]
    if preset != "tiny":
        marks.append(pytest.mark.slow)
    return [pytest.param(row, preset, mutation, marks=marks, id=f"{preset}-{mutation}")]


@pytest.mark.parametrize(("row", "preset", "mutation"),
                         [p for r in RUMUR_ROWS for p in _rumur_params(r)])
@pytest.mark.usefixtures("rumur_check")  # shares test_rumur.py's runs
def test_rumur_row_reproduces(row: table.Row, preset: str, mutation: str | None) -> None:
    again = cli.run_rumur(PRESETS[preset], mutation).row
    assert (again.result, again.states) == (row.result, row.states)


def _refinement_params(row: table.Row) -> object:
    name = row.command.split("--refinement ")[1].split()[0]
    marks = [pytest.mark.slow] if name.startswith("arc") or name.endswith("vllm") else []
    return pytest.param(row, name, marks=marks, id=name)


@pytest.mark.parametrize(("row", "name"), [_refinement_params(r) for r in REFINEMENT_ROWS])
def test_refinement_row_reproduces(row: table.Row, name: str) -> None:
    again = cli.run_refinement(name, TINY).row
    assert (again.result, again.states) == (row.result, row.states)
