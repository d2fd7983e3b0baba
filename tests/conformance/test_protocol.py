"""The call protocol (docs/protocol.md): every message of real sessions follows the
published schema (protocol_schema.json), answers are read strictly (a wrong field is
the target's answer being wrong, naming its property; a message that is not one is
garbage), and ``--exec`` checks any program that speaks it."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvoffload.conformance import check
from kvoffload.conformance.adapter_api import RETRY
from kvoffload.conformance.cli import main
from kvoffload.conformance.errors import Untranslatable
from kvoffload.conformance.target import remote as remote_module
from kvoffload.conformance.target.protocol import (
    NOT_RETURNED,
    PROTOCOL_VERSION,
    LineCache,
    ProtocolError,
    call_line,
    call_message,
    dumps,
    loads,
    raised_message,
    read_call_line,
    read_returned_line,
    read_value,
    value_line,
    value_message,
)
from kvoffload.spec import Call, LookupResult, Op

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX"),
              pytest.mark.usefixtures("python_hosts")]
"""The judge's Python hosts are forks of one host zygote (tests/conftest.py): they speak
the protocol as a host started afresh does (its start is test_host.py's subject)."""

SCHEMA = json.loads((Path(remote_module.__file__).parent / "protocol_schema.json").read_text())
SMALL = ["--max-examples", "5", "--steps", "30", "--seed", "3", "--no-database", "--quiet"]


def recorded_session(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every message the judge sends and receives from now on (appended as they go),
    read back from the bytes on the channel."""
    messages: list[dict[str, Any]] = []
    send, receive = remote_module.HostProcess.send_line, remote_module.HostProcess.receive_line

    def sending(self: Any, line: bytes, now: bool = True) -> None:
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        messages.append(json.loads(line))
        send(self, line, now)

    def receiving(self: Any, timeout: float, during: str) -> bytes:
        line: bytes = receive(self, timeout, during)
        messages.append(json.loads(line))
        return line

    monkeypatch.setattr(remote_module.HostProcess, "send_line", sending)
    monkeypatch.setattr(remote_module.HostProcess, "receive_line", receiving)
    return messages


def test_a_whole_session_follows_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = recorded_session(monkeypatch)
    result = check("kvoffload.impl:OffloadManager", max_examples=5, steps=60, seed=3)
    assert result.verdict == "conforms"
    validator = jsonschema.Draft202012Validator(SCHEMA)
    distinct = dict.fromkeys(json.dumps(m, sort_keys=True) for m in messages)
    for text in distinct:  # each distinct message once (945 messages, 261 distinct)
        validator.validate(json.loads(text))
    kinds = {m.get("request") or m.get("answer") for m in messages}
    assert {"hello", "new", "built", "call", "returned", "raised", "bye"} <= kinds
    values = {m["value"]["kind"] for m in messages if m.get("answer") == "returned"}
    assert {"lookup", "store_plan", "load_plan", "completion", "events", "reset"} <= values


def test_an_answer_the_adapter_cannot_read_is_sent_as_untranslatable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = recorded_session(monkeypatch)
    target = f"{Path(__file__).parent / 'hostile_targets.py'}:FloatSlots"
    result = check(target, max_examples=5, seed=3, stop_at_first=True)
    assert result.violation is not None
    assert result.violation.prop == "slots"
    untranslatable = [m for m in messages if m.get("answer") == "untranslatable"]
    assert untranslatable
    assert untranslatable[0]["prop"] == "slots"
    jsonschema.Draft202012Validator(SCHEMA).validate(untranslatable[0])


@pytest.mark.parametrize(("op", "value", "prop"), [
    (Op.PREPARE_STORE, {"kind": "store_plan", "keys": ["a"], "slots": [0.5], "evicted": []},
     "slots"),
    (Op.PREPARE_STORE, {"kind": "store_plan", "keys": ["a"], "slots": [True], "evicted": []},
     "slots"),
    (Op.PREPARE_STORE, {"kind": "store_plan", "keys": [["a"]], "slots": [0], "evicted": []},
     "store-plan"),
    (Op.PREPARE_LOAD, {"kind": "load_plan", "keys": ["a"], "slots": [0], "ticket": "t0"},
     "tickets"),
    (Op.RESET_CACHE, {"kind": "reset", "epoch": 1.0}, "epochs"),
    (Op.LOOKUP, {"kind": "lookup", "result": "MAYBE"}, "lookup"),
    (Op.LOOKUP, {"kind": "completion", "applied": [], "released": [], "ignored": []}, "lookup"),
    (Op.TAKE_EVENTS, {"kind": "events", "batches": [{"keys": ["a"]}]}, "events"),
])
def test_a_wrong_field_breaks_its_property(op: Op, value: dict[str, Any], prop: str) -> None:
    with pytest.raises(Untranslatable) as raised:
        read_value(op, value)
    assert raised.value.prop == prop


@pytest.mark.parametrize("line", [b"V0", b"[1, 2]", b"\xff\xfe", b'"returned"'])
def test_a_line_that_is_no_message_is_garbage(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        loads(line)


EXEC_HOST = """
import json, sys
CALLS = 0
for line in sys.stdin:
    message = json.loads(line)
    request = message["request"]
    if request == "hello":
        answer = {"answer": "hello", "protocol": PROTOCOL_VERSION + VERSION_SHIFT}
    elif request == "new":
        answer = {"answer": "built", "protocol": PROTOCOL_VERSION, "adapter": "native",
                  "why": "a test host", "capabilities": {"touch": False, "reset": False,
                  "events": False}}
    elif request == "call":
        CALLS += 1
        if CALLS == GARBAGE_AT:
            print("V0", flush=True)
            continue
        call = message["call"]
        op = call["op"]
        if op == "lookup":
            value = {"kind": "lookup", "result": "MISS"}
        elif op == "prepare_store":
            value = {"kind": "rejected", "needed": 1, "available": 0}
        else:
            value = {"kind": "completion", "applied": [], "released": [], "ignored": call["keys"]}
        answer = {"answer": "returned", "value": value}
    else:
        break
    print(json.dumps(answer), flush=True)
"""
"""A protocol host in a few lines: it rejects every store (not conforming); VERSION_SHIFT
and GARBAGE_AT make it speak another version or write garbage on its Nth call.
PROTOCOL_VERSION is written in as a number: the host imports nothing of kvoffload (a
check restarts it after each garbage line, and the import was most of its start-up)."""


def _exec_host(folder: Path, shift: int = 0, garbage_at: int = 0) -> str:
    path = folder / "host.py"
    path.write_text(textwrap.dedent(EXEC_HOST).replace("VERSION_SHIFT", str(shift))
                    .replace("GARBAGE_AT", str(garbage_at))
                    .replace("PROTOCOL_VERSION", str(PROTOCOL_VERSION)))
    return f"{sys.executable} {path}"


def test_exec_checks_any_program_that_speaks_the_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--exec", _exec_host(tmp_path), *SMALL, "--stop-at-first",
                 "--report-dir", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "adapter        native (a test host)" in out
    assert "violated" in out
    assert "shrunk trace (1 call, tier of 1 slot)" in out


def test_a_host_that_writes_garbage_fails_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--exec", _exec_host(tmp_path, garbage_at=1), *SMALL,
                 "--stop-at-first", "--report-dir", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "property 'crash' violated" in out
    assert "not a protocol message" in out


def test_a_host_of_another_protocol_version_cannot_be_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--exec", _exec_host(tmp_path, shift=1), *SMALL,
                 "--report-dir", str(tmp_path / "r")]) == 2
    assert "protocol version 2" in capsys.readouterr().err


def test_exec_and_a_target_together_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "kvoffload.impl:OffloadManager", "--exec", "true", *SMALL,
                 "--report-dir", str(tmp_path / "r")]) == 2
    assert "--exec CMD is the target" in capsys.readouterr().err


def test_in_process_is_explicit_and_the_default_is_a_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = recorded_session(monkeypatch)
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    assert check("kvoffload.impl:OffloadManager", max_examples=3, seed=3).verdict == "conforms"
    assert messages == []  # no host
    monkeypatch.delenv("KVOFFLOAD_IN_PROCESS")
    result = check("kvoffload.impl:OffloadManager", max_examples=3, seed=3)
    assert result.verdict == "conforms"
    assert messages
    assert result.extra["host_start_s"] > 0


# --- the line caches: a line read again reads as it did, validation included ---------


def test_a_call_line_is_its_message_encoded() -> None:
    calls = [Call(Op.LOOKUP, ("a",)), Call(Op.COMPLETE_STORE, ("a", 2), success=False, ticket=7),
             Call(Op.RESET_CACHE), Call(Op.TAKE_EVENTS)]
    for call in [*calls, *calls]:
        assert call_line(call) == dumps(call_message(call))
        assert read_call_line(call_line(call)) == call


def test_a_call_line_is_read_strictly_every_time() -> None:
    bad = b'{"request":"call","call":{"op":"lookup","keys":[["a"]]}}\n'
    for _ in range(2):
        with pytest.raises(ProtocolError):
            read_call_line(bad)
    assert read_call_line(b'{"request":"bye"}\n') is None


@pytest.mark.parametrize(("op", "value"), [
    (Op.LOOKUP, LookupResult.HIT), (Op.LOOKUP, RETRY), (Op.LOOKUP, 1), (Op.TOUCH, None),
    (Op.COMPLETE_LOAD, None), (Op.RESET_CACHE, None), (Op.RESET_CACHE, True),
    (Op.RESET_CACHE, 1), (Op.LOOKUP, None),
])
def test_an_answer_line_is_its_message_encoded(op: Op, value: object) -> None:
    assert value_line(op, value) == dumps(value_message(op, value))


def test_an_answer_line_read_again_reads_the_same_and_a_wrong_one_fails_again() -> None:
    line = dumps(value_message(Op.LOOKUP, LookupResult.PENDING))
    assert read_returned_line(Op.LOOKUP, line) is LookupResult.PENDING
    assert read_returned_line(Op.LOOKUP, line) is LookupResult.PENDING
    with pytest.raises(Untranslatable):  # the same line, answering another call
        read_returned_line(Op.RESET_CACHE, line)
    wrong = b'{"answer":"returned","value":{"kind":"reset","epoch":true}}\n'
    for _ in range(2):
        with pytest.raises(Untranslatable):
            read_returned_line(Op.RESET_CACHE, wrong)
    raised = dumps(raised_message("E", None, "no", False))
    assert read_returned_line(Op.LOOKUP, raised) is NOT_RETURNED


def test_a_line_cache_stays_bounded() -> None:
    cache = LineCache()
    for i in range(LineCache.LIMIT + 10):
        cache.keep(i, i)
    assert len(cache) <= LineCache.LIMIT
    assert cache[LineCache.LIMIT + 9] == LineCache.LIMIT + 9
