"""The results table of ``proofs/README.md``: rows, rendering, and reading it back.

The table lies between two marker comments; everything else in the README is prose
kept by hand. The default test tier reads the recorded rows back and reruns the TINY
ones, comparing verdicts and state counts (never times).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- results: begin (generated) -->", "<!-- results: end -->"
TRACES_BEGIN, TRACES_END = "<!-- traces: begin (generated) -->", "<!-- traces: end -->"
MUTANTS_BEGIN, MUTANTS_END = "<!-- mutants: begin (generated) -->", "<!-- mutants: end -->"
COLUMNS = ("property", "tool", "bound", "exhaustive or sampled", "result", "states", "time",
           "command")


@dataclass(frozen=True)
class Row:
    """One recorded result."""

    prop: str
    tool: str
    bound: str
    coverage: str
    result: str
    states: str
    time: str
    command: str

    def cells(self) -> tuple[str, ...]:
        return (self.prop, self.tool, self.bound, self.coverage, self.result, self.states,
                self.time, f"`{self.command}`")


def render(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row.cells()) + " |"
              for row in rows]
    return "\n".join(lines)


def _between(text: str, begin: str, end: str) -> tuple[int, int]:
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{README} lacks the markers {begin!r} ... {end!r}")
    return start + len(begin), stop


def write(rows: list[Row], traces: str, mutants: str = "", path: Path = README) -> None:
    """Replace the generated tables and traces in the README, keep the prose."""
    text = path.read_text()
    parts = [(BEGIN, END, render(rows)), (TRACES_BEGIN, TRACES_END, traces.rstrip())]
    if mutants:
        parts.append((MUTANTS_BEGIN, MUTANTS_END, mutants.rstrip()))
    for begin, end, body in parts:
        a, b = _between(text, begin, end)
        text = text[:a] + "\n" + body + "\n" + text[b:]
    path.write_text(text)


def read_traces(path: Path = README) -> str:
    """The recorded counterexample traces, as written."""
    text = path.read_text()
    a, b = _between(text, TRACES_BEGIN, TRACES_END)
    return text[a:b].strip()


def read(path: Path = README) -> list[Row]:
    """The recorded rows."""
    text = path.read_text()
    a, b = _between(text, BEGIN, END)
    rows = []
    for line in text[a:b].strip().splitlines()[2:]:
        cells = [c.strip().replace("\\|", "|")
                 for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != len(COLUMNS):
            raise ValueError(f"malformed row in {path}: {line}")
        prop, tool, bound, coverage, result, states, time, command = cells
        rows.append(Row(prop, tool, bound, coverage, result, states, time, command.strip("`")))
    return rows
