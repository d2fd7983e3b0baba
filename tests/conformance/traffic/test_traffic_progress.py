"""The progress display: a line rewritten in place at a terminal, quarter lines when
asked for elsewhere, nothing otherwise."""

from __future__ import annotations

import io

from kvoffload.conformance.traffic.progress import Display


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_line_rewritten_and_cleared() -> None:
    stream = Terminal()
    display = Display(None, stream)
    show = display.task("trace lru", 4)
    assert show is not None
    for done in (1, 2, 3, 4):
        show(done)
    display.done()
    text = stream.getvalue()
    assert text.startswith("\r\033[Kkvoffload traffic: trace lru: ")
    assert "4/4 requests" in text
    assert "\n" not in text
    assert text.endswith("\r\033[K")


def test_off_a_terminal_only_when_asked() -> None:
    quiet = io.StringIO()
    assert Display(None, quiet).task("x", 4) is None
    assert Display(False, Terminal()).task("x", 4) is None
    stream = io.StringIO()
    show = Display(True, stream).task("x", 8)
    assert show is not None
    for done in range(1, 9):
        show(done)
    lines = stream.getvalue().splitlines()
    assert [line.split(": ")[2].split(",")[0] for line in lines] == [
        "1/8 requests", "2/8 requests", "4/8 requests", "6/8 requests", "8/8 requests"]
