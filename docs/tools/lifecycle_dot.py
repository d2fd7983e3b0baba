"""The per-key lifecycle graph, as Graphviz DOT, projected from the spec's explored steps.

Nodes are a key's phases, plus the copies a reset leaves running and the free slot
they end in. An edge carries every call that took some key from its source to its
target in the exploration; a self-loop shows only calls that change the key's readers
or answer something about it (a lookup result, a misuse error, an ignored completion,
a rejected store).
Calls that never change a phase and answer nothing are named in the caption.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from kvoffload.spec import CopyKind, Op

from .lifecycle_projection import GLOBAL_OPS, CopyChange, Effect, KeyPhase

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


def render(effects: Sequence[Effect], caption: str, command: str) -> str:
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
