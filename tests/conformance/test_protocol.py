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
from kvoffload.conformance import remote as remote_module
from kvoffload.conformance.cli import main
from kvoffload.conformance.errors import Untranslatable
from kvoffload.conformance.protocol import ProtocolError, loads, read_value
from kvoffload.spec import Op

pytestmark = pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")

SCHEMA = json.loads((Path(remote_module.__file__).parent / "protocol_schema.json").read_text())
SMALL = ["--max-examples", "5", "--steps", "30", "--seed", "3", "--no-database", "--quiet"]


def recorded_session(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every message the judge sends and receives from now on (appended as they go)."""
    messages: list[dict[str, Any]] = []
    send, receive = remote_module.HostProcess.send, remote_module.HostProcess.receive

    def sending(self: Any, message: dict[str, Any], now: bool = True) -> None:
        messages.append(message)
        send(self, message, now)

    def receiving(self: Any, timeout: float, during: str) -> dict[str, Any]:
        answer: dict[str, Any] = receive(self, timeout, during)
        messages.append(answer)
        return answer

    monkeypatch.setattr(remote_module.HostProcess, "send", sending)
    monkeypatch.setattr(remote_module.HostProcess, "receive", receiving)
    return messages


def test_a_whole_session_follows_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = recorded_session(monkeypatch)
    result = check("kvoffload.impl:OffloadManager", max_examples=5, steps=60, seed=3)
    assert result.verdict == "conforms"
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for message in messages:
        validator.validate(message)
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
from kvoffload.conformance.protocol import PROTOCOL_VERSION
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
and GARBAGE_AT make it speak another version or write garbage on its Nth call."""


def _exec_host(folder: Path, shift: int = 0, garbage_at: int = 0) -> str:
    path = folder / "host.py"
    path.write_text(textwrap.dedent(EXEC_HOST).replace("VERSION_SHIFT", str(shift))
                    .replace("GARBAGE_AT", str(garbage_at)))
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
