"""The rumur cross-check: the Murphi model agrees with the Python checker.

The parsing and the constants are tested without rumur; the runs need Debian's
``rumur`` and a C compiler (``apt-get install -y rumur``) and are skipped without them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from proofs.modelcheck import rumur
from proofs.modelcheck.bounds import SMALL, TINY, Bounds
from proofs.modelcheck.checks import CHECKS_BY_NAME
from proofs.modelcheck.explorer import Result, explore
from proofs.modelcheck.properties import NODE_PROPERTIES

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""

needs_rumur = pytest.mark.skipif(shutil.which("rumur") is None,
                                 reason="rumur is not installed (apt-get install -y rumur)")

OUTPUT = """\
Status:

\tNo error found.

State Space Explored:

\t211 states, 4545 rules fired in 0s.
"""

ERROR_OUTPUT = """\
The following is the error trace for the error:

\tinvariant "lru_queues_evictable_blocks" failed

Startstate "empty tier" fired.
Rule "prepare_store([k1])", k1: key_t_0 fired.
Rule "touch([k1])", k1: key_t_0 fired.
End of the error trace.

Status:

\t1 error(s) found.

State Space Explored:

\t4 states, 20 rules fired in 0s.
"""


def test_parse_a_verdict_that_holds() -> None:
    result = rumur.parse(OUTPUT, 0.1, 2.0, 0.3)
    assert (result.verdict, result.states, result.rules_fired) == ("holds", 211, 4545)
    assert result.seconds == pytest.approx(2.4)


def test_parse_a_counterexample() -> None:
    result = rumur.parse(ERROR_OUTPUT)
    assert result.verdict == "violated"
    assert result.error == 'invariant "lru_queues_evictable_blocks" failed'
    assert rumur.trace_rules(ERROR_OUTPUT) == [
        "prepare_store([k1]) [k1: key_t_0]", "touch([k1]) [k1: key_t_0]"]


def test_parse_refuses_output_without_figures() -> None:
    with pytest.raises(ValueError, match="no state count"):
        rumur.parse("Status:\n\tNo error found.\n")


def test_bounds_are_written_into_the_model() -> None:
    text = rumur.source(SMALL)
    assert "  CAPACITY: 3;" in text
    assert "  NKEYS: 4;" in text
    assert "  RESETS: 2;" in text
    assert "  READERS: 2;" in text
    assert rumur.source(TINY) == rumur.MODEL.read_text()  # the file holds TINY's bounds
    with pytest.raises(ValueError, match="width 2"):
        rumur.source(Bounds("w", 2, ("a", "b"), 1, 1, width=3))


@needs_rumur
def test_rumur_agrees_with_the_python_checker_at_tiny(
    run_check: RunCheck, rumur_check: Callable[..., rumur.RumurResult]
) -> None:
    ours = run_check("spec-lru")
    theirs = rumur_check(TINY)
    assert theirs.verdict == ours.verdict == "holds"
    assert theirs.states == ours.states


@needs_rumur
def test_rumur_agrees_under_the_background_eviction(
    rumur_check: Callable[..., rumur.RumurResult], run_check: RunCheck
) -> None:
    """With the opt-in background eviction (D14) in both models, rumur reaches as many
    classes of states as the Python checker (``spec-lru+background-eviction``)."""
    ours = run_check("spec-lru+background-eviction")
    theirs = rumur_check(TINY, background=True)
    assert theirs.verdict == ours.verdict == "holds"
    assert theirs.states == ours.states
    assert "BACKGROUND: true;" in rumur.source(TINY, background=True)
    assert "BACKGROUND: false;" in rumur.source(TINY)


@needs_rumur
def test_rumur_agrees_under_the_node_failure(
    rumur_check: Callable[..., rumur.RumurResult], run_check: RunCheck
) -> None:
    """With the node's failure (D15) in both models, rumur reaches as many classes of
    states as the Python checker (``spec-lru+node-failure``), and fires the failure in
    every one of them (each state has one ``fail_node()`` more than without it)."""
    ours = run_check("spec-lru+node-failure")
    theirs = rumur_check(TINY, node_failure=True)
    plain = rumur_check(TINY)
    assert theirs.verdict == ours.verdict == "holds"
    assert theirs.states == ours.states
    assert theirs.rules_fired == plain.rules_fired + theirs.states
    assert "NODE_FAILURE: true;" in rumur.source(TINY, node_failure=True)
    assert "NODE_FAILURE: false;" in rumur.source(TINY)


@needs_rumur
def test_rumur_finds_the_same_mutant_with_a_trace_as_short(
    rumur_check: Callable[..., rumur.RumurResult]
) -> None:
    check = CHECKS_BY_NAME["mutant:TouchQueuesStoring"]
    node_properties = frozenset(p.__name__ for p in NODE_PROPERTIES)
    ours = explore(replace(check.setup, properties=node_properties), TINY)
    theirs = rumur_check(TINY, mutation="TouchQueuesStoring")
    assert ours.violation is not None
    assert theirs.verdict == "violated"
    assert ours.violation.prop in theirs.error
    assert len(rumur.trace_rules(theirs.output)) == len(ours.violation.trace)


class _Generated(Exception):
    """Raised by a build that only reads the generated C."""


@needs_rumur
def test_the_generated_c_is_the_same_in_every_folder(tmp_path: Path) -> None:
    """The tests keep one verifier per generated source (conftest.py's
    ``_kept_verifier``): that source must not name the folder ``check`` ran in, or no
    session would find the build of the one before."""
    sources = []

    def read(cc: str, cflags: Sequence[str], folder: Path) -> None:
        sources.append((folder / "model.c").read_text())
        raise _Generated

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        with pytest.raises(_Generated):
            rumur.check(TINY, workdir=tmp_path / name, build=read)
    assert sources[0] == sources[1]
    assert str(tmp_path) not in sources[0]
    assert '"model.m:' in sources[0]  # the checks' messages name the model's file
