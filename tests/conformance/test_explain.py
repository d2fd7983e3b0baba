"""Unit tests of ``kvoffload.conformance.judge.explain``: how errors read in reports."""

from __future__ import annotations

from kvoffload.conformance.judge.explain import error_text
from kvoffload.spec import NotReadable


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
