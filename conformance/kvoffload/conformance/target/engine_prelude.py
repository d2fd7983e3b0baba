"""The helpers every engine-native reproducer carries, verbatim
(:mod:`kvoffload.conformance.command.engine_script`).

This module's source, from the marker line on, is copied into each generated script,
which imports nothing from kvoffload: so it imports only the standard library, and it is
also what the recorder (:mod:`.engine_record`) uses to write down an engine's answers,
so the script compares them in the very form they were recorded in.

A script made of these helpers prints each engine call's line and answer, compares the
answer with the one the engine gave under kvoffload, and at the end prints the calls of
the divergent operation next to what the spec demands. Exit status: 1 the engine
answered every call as it did under kvoffload (the divergence is shown), 0 it answered
something else (not reproduced).
"""

# --- the reproducer's helpers (copied into every script from here on) ---
import dataclasses
import enum
import linecache
import sys
from typing import Any

NAMED: dict[str, Any] = {}
"""Objects the script named (keys, buffers), by name: an answer holding one is written
as its name."""
SAME = [0]
"""How many answers were the same as under kvoffload."""
OTHER: list[tuple[str, Any, Any]] = []
"""The answers that were not: (line, answer, answer under kvoffload)."""
STEPS: list[tuple[str, list[tuple[str, Any]]]] = []


def plain(value: Any, named: dict[str, Any] | None = None) -> Any:
    """An answer in a form that compares across processes: literals as they are,
    sequences item by item, dataclasses field by field, named objects by name, any
    other object by its type."""
    named = NAMED if named is None else named
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    for name, known in named.items():
        try:
            if value is known or (type(value) is type(known) and bool(value == known)
                                  and type(value).__module__ != "builtins"):
                return "<" + name + ">"
        except Exception:
            continue
    if isinstance(value, enum.Enum):
        return "<" + type(value).__name__ + "." + value.name + ">"
    if isinstance(value, (list, tuple)):
        return [plain(item, named) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(item, named) for item in value), key=repr)
    if isinstance(value, dict):
        return [[plain(k, named), plain(v, named)] for k, v in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name), named)
                   for f in dataclasses.fields(value)}}
    if callable(getattr(value, "tolist", None)):
        return plain(value.tolist(), named)
    return "<" + type(value).__name__ + ">"


def _note(line: str, got: Any, expected: Any) -> None:
    same = got == expected
    SAME[0] += same
    if not same:
        OTHER.append((line, got, expected))
    if STEPS:
        STEPS[-1][1].append((line, got))
    print("    " + line + "\n        -> " + repr(got)
          + ("" if same else "   (under kvoffload: " + repr(expected) + ")"))


def saw(value: Any, expected: Any, name: str | None = None) -> None:
    """The answer of the call on the line above, printed and compared with ``expected``
    (what the engine answered under kvoffload); ``name``: the script names it so."""
    frame = sys._getframe(1)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno - 1).strip()
    _note(line, plain(value), expected)
    if name is not None:
        NAMED[name] = value


def made(value: Any, name: str) -> Any:
    """An object the script makes (a key, a backend), named so in the answers."""
    NAMED[name] = value
    return value


def raises(expected: str | None) -> "_Raises":
    """The call in this ``with`` raises (``expected``: its class's name, or None)."""
    return _Raises(expected)


class _Raises:

    def __init__(self, expected: str | None) -> None:
        self.expected = expected

    def __enter__(self) -> "_Raises":
        frame = sys._getframe(1)
        self.line = linecache.getline(frame.f_code.co_filename, frame.f_lineno + 1).strip()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> bool:
        got = None if kind is None else "raises " + kind.__name__
        _note(self.line, got, None if self.expected is None else "raises " + self.expected)
        return kind is not None and issubclass(kind, Exception)


def step(text: str) -> None:
    """One operation of the spec's API, made on the engine by the calls after it."""
    STEPS.append((text, []))
    print(text)


def finish(failing: str, spec_table: str, what: str) -> int:
    """Print the divergent operation's calls beside the spec's demand; the exit status."""
    print()
    same = not OTHER
    calls = [answers for text, answers in STEPS if text.split(". ", 1)[-1] == failing]
    print("the divergence, at " + failing + ":")
    for line, got in (calls[-1] if calls else []):
        print("    " + line + "  -> " + repr(got))
    print("what the spec demands, next to what " + what + " showed under kvoffload:")
    print(spec_table)
    if same:
        print("REPRODUCED: every call answered as it did under kvoffload ("
              + str(SAME[0]) + " answers): " + what + " diverges from the spec here")
        return 1
    print("NOT REPRODUCED: " + str(len(OTHER)) + " answer(s) differ from those under "
          "kvoffload; the first: " + OTHER[0][0] + " -> " + repr(OTHER[0][1]))
    return 0
