"""The generated lifecycle docs (docs/lifecycle.dot, docs/op-phase-table.md) follow the spec.

The generator explores the spec and projects what it sees; these tests check that the
committed files are what it produces now, that the projection says what the spec's
decisions say, and that it really follows the spec's transitions (a planted change in
a transition shows up in the table).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from docs.tools import lifecycle_diagram
from docs.tools.lifecycle_projection import Bounds, effects_of, explore
from docs.tools.lifecycle_render import Exploration, render_table

from kvoffload.spec import LookupResult, Phase, Policy
from kvoffload.spec import transitions as spec_transitions
from kvoffload.spec.state import CacheState
from kvoffload.spec.vocabulary import Key

Table = dict[str, list[str]]
Edges = dict[tuple[str, str], str]


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    return lifecycle_diagram.generate()


def table_of(markdown: str) -> Table:
    """Row label -> cells (ABSENT, STORING, READY idle, READY read)."""
    rows: Table = {}
    for line in markdown.splitlines():
        if line.startswith("| `"):
            label, *cells = line.strip("| ").split(" | ")
            rows[label] = cells
    return rows


def edges_of(dot: str) -> Edges:
    """(source, target) -> label of every edge in the DOT source."""
    found = re.findall(r"^\s*(\w+) -> (\w+) \[label=\"(.*?)\"", dot, flags=re.MULTILINE)
    return {(source, target): label for source, target, label in found}


def test_committed_files_are_what_the_spec_gives_now(generated: dict[Path, str]) -> None:
    for path, text in generated.items():
        committed = path.read_text(encoding="utf-8")
        assert committed == text, (
            f"{path.name} is stale: run `{lifecycle_diagram.COMMAND} --render` and commit")


def test_table_states_the_lifecycle(generated: dict[Path, str]) -> None:
    table = table_of(generated[lifecycle_diagram.TABLE_FILE])
    absent, storing, ready, read = table["`lookup(k)`"]
    assert (absent, storing, ready, read) == ("`MISS`", "`PENDING`", "`HIT`", "`HIT`")
    load = table["`prepare_load([k])`"]
    assert "`NotReadable`" in load[0]
    assert "`NotReadable`" in load[1]
    assert "error" not in load[2]
    assert "error" not in load[3]
    assert table["`prepare_store([j])`"] == ["unaffected", "unaffected", "evicted: → ABSENT",
                                             "unaffected"]
    store = table["`complete_store([k])`"]
    assert store[1] == "`applied`: → READY, readers = 0"
    assert all("`ignored`" in cell for cell in (store[0], store[2], store[3]))
    failed = table["`complete_store([k], success=False)`"]
    assert failed[1] == "`applied`: → ABSENT"
    reset = table["`reset_cache()`"]
    assert "store copy keeps running" in reset[1]
    assert "load copy keeps running" in reset[3]
    late = table["`complete_load([k], ticket=finished)`"]
    assert all("`ignored`" in cell or cell == "(not reached)" for cell in late)
    assert "`UnmatchedCompleteLoad`" in table["`complete_load([k])`"][0]


def test_diagram_draws_the_lifecycle(generated: dict[Path, str]) -> None:
    edges = edges_of(generated[lifecycle_diagram.DOT_FILE])
    assert edges[("ABSENT", "STORING")] == "prepare_store\\l"
    assert edges[("STORING", "READY")] == "complete_store\\l"
    assert "complete_store(success=False)" in edges[("STORING", "ABSENT")]
    assert "prepare_load: NotReadable" in edges[("STORING", "STORING")]
    assert "lookup: PENDING" in edges[("STORING", "STORING")]
    assert "evicted" in edges[("READY", "ABSENT")]
    assert edges[("READ", "ABSENT")] == "reset_cache\\l", "a block being read is never evicted"
    assert ("STORING", "READ") not in edges, "a block being written is never read"
    assert ("STORE", "FREED") in edges
    assert ("LOAD", "FREED") in edges


def test_table_follows_a_changed_transition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant the pre-PR-41795 lookup (an in-flight block reads as a miss): the table says so."""
    fixed_lookup = spec_transitions.lookup

    def two_state_lookup(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
        if state.phase(key) is Phase.STORING:
            return state, LookupResult.MISS
        return fixed_lookup(state, key)

    monkeypatch.setattr(spec_transitions, "lookup", two_state_lookup)
    bounds = Bounds(resets=0)
    states, steps = explore(bounds)
    run = Exploration(bounds, len(states), len(steps),
                      list(effects_of(steps, bounds.keys)))
    table = table_of(render_table(run, run, "test"))
    assert table["`lookup(k)`"][1] == "`MISS`"


def test_check_mode_reports_stale_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "docs" / "generated.md"
    target.parent.mkdir()
    monkeypatch.setattr(lifecycle_diagram, "DOCS", target.parent)
    monkeypatch.setattr(lifecycle_diagram, "generate", lambda: {target: "fresh\n"})
    target.write_text("stale\n", encoding="utf-8")
    assert lifecycle_diagram.main(["--check"]) == 1
    assert "stale: docs/generated.md" in capsys.readouterr().err
    target.write_text("fresh\n", encoding="utf-8")
    assert lifecycle_diagram.main(["--check"]) == 0


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed")
def test_dot_source_renders(generated: dict[Path, str], tmp_path: Path) -> None:
    source = tmp_path / "lifecycle.dot"
    source.write_text(generated[lifecycle_diagram.DOT_FILE], encoding="utf-8")
    svg = subprocess.run(["dot", "-Tsvg", str(source)], check=True, capture_output=True,
                         text=True).stdout
    assert "<svg" in svg
    assert "STORING" in svg


@pytest.mark.slow
def test_larger_bounds_add_no_outcome(generated: dict[Path, str]) -> None:
    """A third key, and ARC with a reset, reach no row, cell or edge the committed bounds miss."""
    larger = lifecycle_diagram.generate(
        Bounds(keys=("a", "b", "c")), Bounds(resets=1, policy=Policy.ARC))
    table, dot = lifecycle_diagram.TABLE_FILE, lifecycle_diagram.DOT_FILE
    assert table_of(larger[table]) == table_of(generated[table])
    assert edges_of(larger[dot]) == edges_of(generated[dot])
