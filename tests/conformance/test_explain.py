"""Unit tests of ``kvoffload.conformance.judge.explain``: how errors read in reports."""

from __future__ import annotations

from kvoffload.conformance.config import CheckConfig, Level
from kvoffload.conformance.judge.explain import error_text, recency_rows
from kvoffload.spec import Call, NotReadable, Op, Policy, apply, initial_state


class CodedError(Exception):
    code = "load-not-ready"


def test_an_error_reads_as_its_class_and_message() -> None:
    assert error_text(KeyError("a")) == "KeyError: 'a'"


def test_a_code_the_message_lacks_is_shown() -> None:
    assert error_text(CodedError("no")) == "CodedError [load-not-ready]: no"


def test_a_spec_error_gives_its_code_once() -> None:
    text = error_text(NotReadable("only READY blocks", keys=("a",)))
    assert text == "NotReadable: [load-not-ready] only READY blocks"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def test_an_error_that_cannot_say_itself_is_still_shown() -> None:
    assert error_text(Unprintable()) == "Unprintable: <exception str() failed>"


def test_an_exit_status_is_no_misuse_code() -> None:
    assert error_text(SystemExit("bye")) == "SystemExit: bye"


def test_the_arc_rows_say_which_end_is_least_recent() -> None:
    """The LRU row said its order ("least recent first"), the ARC rows did not, so a
    reader of "() / ('a', 'b')" had to look up docs/spec.md D10 to learn that 'a' is
    the next victim (session 41's clean-room manager)."""
    state = initial_state(2, Policy.ARC)
    for call in (Call(Op.PREPARE_STORE, ("a", "b")), Call(Op.COMPLETE_STORE, ("b", "a")),
                 Call(Op.TOUCH, ("b", "a")), Call(Op.PREPARE_STORE, ("c",))):
        state, _ = apply(state, call)
    config = CheckConfig(policy=Policy.ARC, level=Level.EXACT)
    rows = {aspect: spec for aspect, spec, _ in recency_rows(state, config)}
    assert rows == {"ARC t1 / t2 (least recent first)": "('c',) / ('b',)",
                    "ARC ghosts b1 / b2 (oldest first)": "() / ('a',)",
                    "ARC p": "0"}
