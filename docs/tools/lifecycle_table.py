"""The operation x phase table, in Markdown, projected from the spec's explored steps.

Rows are calls as seen from one key ``k`` (``j`` is another key); columns are the phase
of ``k`` before the call; a cell lists every distinct outcome the exploration met.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kvoffload.spec import Op

from .lifecycle_explore import Bounds
from .lifecycle_projection import Effect, KeyPhase, describe

Outcomes = dict[KeyPhase, set[tuple[str, str]]]

_EPOCH_RANK = {"": 0, "current": 1, "earlier": 2, "later": 3}
_OPS = list(Op)
_FAILED = ", success=False"


def _code(token: str) -> str:
    return f"`{token}`"


@dataclass(frozen=True)
class Exploration:
    """One exploration's bounds, size, and the effects of its steps on its keys."""

    bounds: Bounds
    states: int
    steps: int
    effects: Sequence[Effect]


def _row_order(e: Effect) -> tuple[int, bool, int, bool]:
    epoch = e.call.split("epoch=")[1].rstrip(")") if "epoch=" in e.call else ""
    return _OPS.index(e.op), not e.named, _EPOCH_RANK[epoch], _FAILED in e.call


def collect(effects: Iterable[Effect]) -> tuple[dict[str, Outcomes], list[str]]:
    """The outcomes per (row, phase), and the rows in display order."""
    cells: dict[str, Outcomes] = defaultdict(lambda: defaultdict(set))
    order: dict[str, tuple[int, bool, int, bool]] = {}
    for e in effects:
        cells[e.call][e.before].add(describe(e, _code))
        order[e.call] = _row_order(e)
    return cells, sorted(order, key=lambda row: (order[row], row))


def _failed_twin(row: str) -> str:
    """``complete_store([k], epoch=X)`` -> ``complete_store([k], success=False, epoch=X)``."""
    if "epoch=" in row:
        return row.replace(", epoch=", _FAILED + ", epoch=")
    return row.replace("])", "]" + _FAILED + ")")


def _merge_failed(cells: dict[str, Outcomes], rows: list[str]) -> list[tuple[str, str]]:
    """(row, label) pairs; a ``success=False`` row that reads exactly like its
    ``success=True`` twin is folded into it."""
    labels = []
    for row in rows:
        if _FAILED in row and cells.get(row.replace(_FAILED, "")) == cells[row]:
            continue
        twin = _failed_twin(row) if row.startswith("complete_store") else None
        same = twin is not None and _FAILED not in row and cells.get(twin) == cells[row]
        labels.append((row, f"`{row}`" + (" (either `success`)" if same else "")))
    return labels


def _words(outcomes: set[tuple[str, str]], unseen: str) -> list[str]:
    """Outcomes in words; those answering the same thing share one entry."""
    if not outcomes:
        return [unseen]
    by_answer: dict[str, list[str]] = defaultdict(list)
    for answer, change in sorted(outcomes):
        by_answer[answer].append(change)
    words = []
    for answer, changes in by_answer.items():
        changes = [c for c in changes if c]
        joined = " / ".join(changes)
        words.append(f"{answer}: {joined}" if answer and joined else answer or joined)
    return words


def _cell(main: set[tuple[str, str]], extra: set[tuple[str, str]], extra_name: str,
          unseen: str) -> str:
    text = " **or** ".join(_words(main, unseen))
    if extra - main:
        text += f"; under {extra_name} also: " + " **or** ".join(_words(extra - main, unseen))
    return text


def render(main: Exploration, extra: Exploration, command: str) -> str:
    """The Markdown page: the table for ``main``, with what ``extra`` adds in each cell."""
    cells, rows = collect(main.effects)
    extra_cells, _ = collect(extra.effects)
    phases = list(KeyPhase)
    lines = [
        "# Operation x phase table",
        "",
        f"Generated from the spec by `{command}`; do not edit by hand",
        "(`tests/docs/test_lifecycle_docs.py` checks that this file is what the spec gives now).",
        "",
        f"Explored: {main.bounds.describe()} ({main.states} states, {main.steps} steps);",
        f"{extra.bounds.describe()} ({extra.states} states, {extra.steps} steps).",
        f"Cells list every outcome met under {main.bounds.policy.name}; what only "
        f"{extra.bounds.policy.name} adds is marked.",
        "",
        "`k` is the key whose phase heads the column, `j` another key. Completion forms:",
        "no epoch (vLLM's form), `epoch=current`, `epoch=earlier` (a job from before a reset),",
        "`epoch=later` (an epoch that has not begun). `error X (code)`: the typed misuse error",
        "raised; the state is unchanged. `applied` / `released` / `ignored`: the `Completion`",
        "field that holds `k`; `released` means the completion finished a copy that a reset",
        "left running. `no change`: the call is ignored, the state stays as it was.",
        "A call on another key `j` is listed only if it can change `k`.",
        "",
        "| call | " + " | ".join(p.value for p in phases) + " |",
        "| --- | " + " | ".join("---" for _ in phases) + " |",
    ]
    for row, label in _merge_failed(cells, rows):
        unseen = "unaffected" if "[j]" in row else "(not reached)"
        extra_row = extra_cells.get(row, {})
        row_cells = [_cell(cells[row].get(p, set()), extra_row.get(p, set()),
                           extra.bounds.policy.name, unseen) for p in phases]
        lines.append(f"| {label} | " + " | ".join(row_cells) + " |")
    return "\n".join(lines) + "\n"
