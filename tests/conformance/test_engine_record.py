"""The engine-call record and the engine-native reproducer written from it.

Cheap: the engine is :mod:`fake_engine` (standard library), carried into each script as
LMCache's harness is; the LMCache and vLLM cases are in test_engine_script_lmcache.py and
test_engine_script_vllm.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fake_engine
import pytest

from kvoffload.conformance.command import engine_script
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.target import engine_record
from kvoffload.spec import Call, Op

MARKER = "# --- the fake engine"


def violation() -> PropertyViolation:
    found = PropertyViolation("lookup", "lookup('a') must answer HIT; the target answered MISS",
                              [("call", "lookup('a')", "lookup('a')"),
                               ("answer", "HIT", "MISS")])
    found.trace = (Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",)))
    found.generated, found.step, found.capacity = 2, 2, 1
    return found


def recorded(method: str) -> list[dict[str, object]]:
    """What an adapter over :class:`fake_engine.Shelf` would record for the trace."""
    rec = engine_record.Recorder()
    rec.carry(fake_engine, MARKER)
    shelf = rec.wrap(rec.new(fake_engine.Shelf, 1, name="shelf"), "shelf")
    rec.mark("prepare_store(['a'])")
    shelf.put("a", b"\x00" * 4)
    rec.mark("lookup('a')")
    getattr(shelf, method)("a")
    with pytest.raises(KeyError):
        shelf.take("b")
    return rec.entries


def test_each_call_is_written_as_a_line_of_the_engines_python_with_its_answer() -> None:
    entries = recorded("has")
    codes = [(e.get("code"), e.get("answer"), e.get("raises")) for e in entries if "code" in e]
    assert codes == [("shelf = Shelf(1)", None, None),
                     ("shelf.put('a', b'\\x00\\x00\\x00\\x00')", "True", None),
                     ("shelf.has('a')", "True", None),
                     ("shelf.take('b')", None, "KeyError")]
    assert {"call": "lookup('a')"} in entries


def test_recording_off_changes_nothing() -> None:
    shelf = fake_engine.Shelf(1)
    assert engine_record.OFF.wrap(shelf, "shelf") is shelf
    assert isinstance(engine_record.OFF.new(fake_engine.Shelf, 2), fake_engine.Shelf)
    assert engine_record.active() is engine_record.OFF


def test_an_answer_that_comes_back_is_reproduced_in_a_fresh_process() -> None:
    source = engine_script.script_source("vllm==0", violation(), recorded("has"))
    reproduced, status, output = engine_script.confirm(source, timeout=60)
    assert (reproduced, status) == (True, 1), output
    assert "REPRODUCED:" in output
    assert "the divergence, at lookup('a'):" in output
    assert "shelf.has('a')" in output


def test_an_answer_that_differs_outside_kvoffload_is_not_reproduced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "as-in-the-suites-host")  # however pytest was started
    source = engine_script.script_source("vllm==0", violation(),
                                         recorded("has_under_kvoffload"))
    reproduced, status, output = engine_script.confirm(source, timeout=60)
    assert (reproduced, status) == (False, 0), output
    assert "NOT REPRODUCED" in output
    assert "shelf.has_under_kvoffload('a')" in output


def test_a_script_that_breaks_is_not_reproduced() -> None:
    source = engine_script.script_source("vllm==0", violation(), recorded("has"))
    reproduced, status, output = engine_script.confirm(
        source.replace("made(Shelf(1),", "made(Shelf(1, 2),"), timeout=60)
    assert (reproduced, status) == (False, 2), output


def test_the_script_imports_nothing_from_kvoffload() -> None:
    source = engine_script.script_source("vllm==0", violation(), recorded("has"))
    tree = ast.parse(source)
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module or "" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)}
    assert not any(m.split(".")[0] in ("kvoffload", "fake_engine") for m in modules), modules
    assert "kvoffload check vllm==0" in source  # the header says where it came from


def test_only_engine_targets_get_a_script() -> None:
    assert engine_script.engine_of("lmcache==0.5.6") == "LMCache"
    assert engine_script.engine_of("vllm==0.20.2") == "vLLM"
    assert engine_script.engine_of("kvoffload.impl:OffloadManager") is None


def test_a_host_asked_to_record_sends_the_entries_back_with_each_answer() -> None:
    import json

    import jsonschema

    from kvoffload.conformance.config import CheckConfig
    from kvoffload.conformance.target import host as host_module
    from kvoffload.conformance.target.protocol import config_fields

    schema = json.loads((Path(host_module.__file__).parent / "protocol_schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    host = host_module.Host()
    hello = {"request": "hello", "protocol": 1, "target": "kvoffload.impl:OffloadManager",
             "config": config_fields(CheckConfig())}
    assert host.hello(hello)["answer"] == "hello"
    try:
        built = host.new(2, record=True)
        answer = json.loads(host.call(Call(Op.LOOKUP, ("a",))))
    finally:
        engine_record.stop()
    for message in (built, answer):
        validator.validate(message)
    assert built["engine"] == []  # kvoffload's own manager is no engine: no calls recorded
    assert answer["engine"] == [{"call": "lookup('a')"}]
    assert "engine" not in host.new(2)  # not asked: nothing recorded, no field


def test_the_report_says_whether_the_engine_script_reproduced(tmp_path: Path) -> None:
    import json

    from kvoffload.conformance.command.report import summary_text, write_check_report
    from kvoffload.conformance.command.runner import CheckResult, Failure
    from kvoffload.conformance.config import CheckConfig

    shown = Failure(violation())
    shown.engine = engine_script.EngineReproducer("print('x')\n", True, 1, "REPRODUCED", 1.0)
    other = Failure(violation())
    other.violation.prop = "slots"
    other.engine = engine_script.EngineReproducer("print('y')\n", False, 0, "NOT", 1.0)
    result = CheckResult("vllm==0", "vllm-enum", "given", CheckConfig(), ("lookup", "slots"),
                         {}, {}, failures=[shown, other])
    report, _ = write_check_report(result, tmp_path)
    data = json.loads(report.read_text())
    engines = [v["engine_reproducer"] for v in data["violations"]]
    assert [e["reproduced"] for e in engines] == [True, False]
    assert engines[1]["verdict"] == engine_script.NOT_REPRODUCED
    assert Path(engines[0]["path"]).read_text() == "print('x')\n"
    summary = summary_text(result)
    assert f"FAILED ({engine_script.NOT_REPRODUCED})" in summary
    assert summary.count(engine_script.NOT_REPRODUCED) == 1
