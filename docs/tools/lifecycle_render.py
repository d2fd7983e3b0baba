"""The two generated pages, rendered from the per-key effects of the spec's steps.

:func:`render_dot` draws the per-key lifecycle graph as Graphviz DOT. Nodes are a key's
phases, plus the copies a reset leaves running and the free slot they end in. An edge
carries every call that took some key from its source to its target in the exploration;
a self-loop shows only calls that change the key's readers or answer something about it
(a lookup result, a misuse error, an ignored completion, a rejected store). Calls that
never change a phase and answer nothing are named in the caption.

:func:`render_table` writes the operation x phase table in Markdown. Rows are calls as
seen from one key ``k`` (``j`` is another key); columns are the phase of ``k`` before the
call; a cell lists every distinct outcome the exploration met.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kvoffload.spec import CopyKind, Op

from .lifecycle_projection import GLOBAL_OPS, Bounds, CopyChange, Effect, KeyPhase, describe

# --- the lifecycle graph (DOT) -------------------------------------------------------

_SHOWN_ON_SELF_LOOPS = {"MISS", "PENDING", "HIT", "ignored", "StoreRejected", "already present"}
_SILENT_RESULTS = {"", "applied", "StorePlan", "LoadPlan", "None", "stored", "removed"}

_NODES = {
    KeyPhase.ABSENT.name: "ABSENT",
    KeyPhase.STORING.name: "STORING",
    KeyPhase.READY.name: "READY\\nreaders = 0\\n(evictable)",
    KeyPhase.READ.name: "READY\\nreaders > 0\\n(pinned)",
    CopyKind.STORE.name: "store copy\\nleft running\\n(slot held)",
    CopyKind.LOAD.name: "load copy\\nleft running\\n(slot held)",
    "FREED": "slot free",
}


def _line(e: Effect) -> str:
    """One edge-label line: the operation, its failure flag, and what it answered."""
    name = str(e.op.value)
    if not e.named and e.op not in GLOBAL_OPS:
        name += " of another key"
    elif "success=False" in e.call and e.result == "applied":
        name += "(success=False)"
    if e.before is e.after and e.readers_delta:
        name += f" ({e.readers_delta:+d} reader)"
    if e.result in _SILENT_RESULTS:
        return name
    return f"{name}: {e.result}"


def edges(effects: Iterable[Effect]) -> tuple[dict[tuple[str, str], set[str]], set[Op]]:
    """Edge labels by (source, target) node, and the operations drawn at all."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    drawn: set[Op] = set()

    def draw(source: str, target: str, line: str, op: Op) -> None:
        found[(source, target)].add(line)
        drawn.add(op)

    for e in effects:
        if e.before is not e.after:
            draw(e.before.name, e.after.name, _line(e), e.op)
        elif e.named and (e.error_code is not None or e.readers_delta
                          or e.result in _SHOWN_ON_SELF_LOOPS):
            draw(e.before.name, e.before.name, _line(e), e.op)
        for kind, change in e.copies:
            if change is CopyChange.LEFT_RUNNING:
                draw(e.before.name, kind.name, _line(e), e.op)
            else:
                more = change is CopyChange.ONE_LESS
                line = f"{e.op.value}: released" + (" (readers remain)" if more else "")
                draw(kind.name, kind.name if more else "FREED", line, e.op)
    return found, drawn


def _grouped(lines: Iterable[str]) -> list[str]:
    """Label lines with the same answer share one line: ``complete_load, complete_store: X``."""
    by_answer: dict[str, list[str]] = defaultdict(list)
    for line in sorted(lines):
        name, _, answer = line.partition(": ")
        by_answer[answer].append(name)
    return sorted(f"{', '.join(names)}: {answer}" if answer else ", ".join(names)
                  for answer, names in by_answer.items())


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def render_dot(effects: Sequence[Effect], caption: str, command: str) -> str:
    """The DOT source of the lifecycle graph."""
    found, drawn = edges(effects)
    silent = sorted(op.value for op in {e.op for e in effects} - drawn)
    errors = sorted({e.result for e in effects if e.error_code is not None})
    if errors:
        caption += f"\\nmisuse errors (typed, state unchanged): {', '.join(errors)}"
    if silent:
        caption += "\\nnot drawn (they never change a phase and answer nothing about a key): "
        caption += ", ".join(silent)
    out = [
        f"// Generated from the spec by `{command}`; do not edit by hand.",
        "digraph lifecycle {",
        "  rankdir=TB;",
        f"  label={_quote(caption)};",
        '  labelloc=b; fontname="Helvetica"; fontsize=11; nodesep=0.5; ranksep=1.1;',
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", '
        'fontname="Helvetica", fontsize=12];',
        '  edge [fontname="Helvetica", fontsize=9];',
        "  start [shape=point, width=0.15, label=\"\"];",
        "  start -> ABSENT;",
        "  subgraph cluster_reset {",
        '    label="copies a reset left running"; style=dashed; fontsize=10;',
    ]
    for name in (CopyKind.STORE.name, CopyKind.LOAD.name, "FREED"):
        shape = ', shape=ellipse, fillcolor="#f4f4f4"' if name == "FREED" else (
            ', fillcolor="#fbf1e6"')
        out.append(f"    {name} [label={_quote(_NODES[name])}{shape}];")
    out.append("  }")
    for phase in KeyPhase:
        out.append(f"  {phase.name} [label={_quote(_NODES[phase.name])}];")
    for (source, target), lines in sorted(found.items()):
        style = ", style=dashed" if target in (CopyKind.STORE.name, CopyKind.LOAD.name) and (
            source in KeyPhase.__members__) else ""
        label = "\\l".join(_grouped(lines)) + "\\l"
        out.append(f"  {source} -> {target} [label={_quote(label)}{style}];")
    out.append("}")
    return "\n".join(out) + "\n"


# --- the operation x phase table (Markdown) ----------------------------------------

Outcomes = dict[KeyPhase, set[tuple[str, str]]]

_TICKET_RANK = {"": 0, "running": 1, "pre-reset": 2, "finished": 3}
_OPS = list(Op)
_FAILED = ", success=False"


def _code(token: str) -> str:
    return f"`{token}`"


@dataclass(frozen=True)
class Exploration:
    """One exploration's bounds, size, and the effects of its steps on its keys (each
    distinct effect once, or as often as met: the pages read them as sets)."""

    bounds: Bounds
    states: int
    steps: int
    effects: Sequence[Effect]


def _row_order(e: Effect) -> tuple[int, bool, int, bool]:
    form = e.call.split("ticket=")[1].rstrip(")") if "ticket=" in e.call else ""
    return _OPS.index(e.op), not e.named, _TICKET_RANK[form], _FAILED in e.call


def collect(effects: Iterable[Effect]) -> tuple[dict[str, Outcomes], list[str]]:
    """The outcomes per (row, phase), and the rows in display order."""
    cells: dict[str, Outcomes] = defaultdict(lambda: defaultdict(set))
    order: dict[str, tuple[int, bool, int, bool]] = {}
    for e in effects:
        cells[e.call][e.before].add(describe(e, _code))
        order[e.call] = _row_order(e)
    return cells, sorted(order, key=lambda row: (order[row], row))


def _failed_twin(row: str) -> str:
    """``complete_store([k], ticket=X)`` -> ``complete_store([k], success=False, ticket=X)``."""
    if "ticket=" in row:
        return row.replace(", ticket=", _FAILED + ", ticket=")
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


def render_table(main: Exploration, extra: Exploration, command: str) -> str:
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
        "no ticket (vLLM's form), `ticket=running` (a job running on the key's live block),",
        "`ticket=pre-reset` (a job a reset left running), `ticket=finished` (a ticket that names",
        "no running job: a finished job's, a duplicate or late report; or one never issued).",
        "`error X (code)`: the typed misuse error",
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
