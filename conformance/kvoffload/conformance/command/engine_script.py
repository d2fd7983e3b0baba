"""Engine-native reproducers: a failure shown in the engine's own API, without kvoffload.

For a TARGET that is an engine (``lmcache==X``, ``vllm==X``), each failure's shrunk
trace is replayed once more in a host with recording on
(:mod:`kvoffload.conformance.target.engine_record`): the adapter writes down every engine call it
makes and the engine's answer. From that record :func:`script_source` writes a standalone script
(the engine's imports, the helpers of :mod:`kvoffload.conformance.target.engine_prelude`, the calls,
the spec's demand at the divergence) that an engine developer can paste into a bug tracker as it is.
:func:`confirm` runs it in a fresh process: the failure is the engine's only where the script shows
the engine answering as it did under kvoffload; otherwise it is reported "not reproduced outside
kvoffload" (still a failure: exit 1).
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import CheckConfig
from ..errors import PropertyViolation
from ..judge.lockstep import construct, replay
from ..judge.properties import describe
from ..target import engine_prelude

ENGINE_PREFIXES = {"lmcache==": "LMCache", "vllm==": "vLLM"}
"""The TARGET kinds that are engines whose adapters record their calls."""
SCRIPT_TIMEOUT_S = 300.0
"""How long a reproducer may run in its fresh process (LMCache's import alone takes
several seconds on a loaded machine)."""
RECORD_TIMEOUT_S = 60.0
"""The least call timeout of the recording replay's host (0, no timeout, stays 0)."""
NOT_REPRODUCED = "not reproduced outside kvoffload"


@dataclass
class EngineReproducer:
    """A failure's engine-native script, and what running it in a fresh process showed."""

    source: str
    reproduced: bool
    status: int | None
    """The script's exit status (1: reproduced; None: it did not end in time)."""
    output: str
    seconds: float

    @property
    def verdict(self) -> str:
        return "reproduced outside kvoffload" if self.reproduced else NOT_REPRODUCED


def engine_of(target: str) -> str | None:
    """The engine a TARGET names (``LMCache``), or None for any other target."""
    return next((name for prefix, name in ENGINE_PREFIXES.items()
                 if target.startswith(prefix)), None)


def record(target: str, config: CheckConfig,
           violation: PropertyViolation) -> tuple[list[dict[str, Any]], PropertyViolation | None]:
    """The engine calls the shrunk trace of ``violation`` makes, replayed in a host with
    recording on; and the violation this replay raised (None: it conformed this time)."""
    from ..target.remote import Builder, target_session

    # A slow start is not the engine's answer: the record's host gets RECORD_TIMEOUT_S
    # at least (LMCache's import alone takes tens of seconds on a loaded machine).
    timeout = config.call_timeout and max(config.call_timeout, RECORD_TIMEOUT_S)
    config = replace(config, capacity=violation.capacity, call_timeout=timeout)
    calls = violation.trace[:violation.generated]
    with target_session(target, config, in_process=False) as prepared:
        builder = prepared.make_adapter
        if not isinstance(builder, Builder):
            raise RuntimeError("an engine target runs in a host")
        builder.remote.record = True
        adapter = construct(builder, violation.capacity, config.call_timeout)
        seen: PropertyViolation | None = None
        try:
            replay(adapter, config, calls, drain=violation.in_drain)
        except PropertyViolation as found:
            seen = found
        return list(builder.remote.engine_entries), seen


def _literal(entry: dict[str, Any]) -> str:
    return str(entry.get("answer", "None"))


def _body(entries: list[dict[str, Any]]) -> list[str]:
    """The calls of ``main()``: each operation a ``step``, each engine call checked."""
    lines: list[str] = []
    operations = 0
    for entry in entries:
        if "call" in entry:
            operations += 1
            lines.append(f"step({f'{operations}. ' + str(entry['call'])!r})")
        elif "source" in entry:
            lines.extend(str(entry["source"]).splitlines())
        elif "code" in entry:
            lines.extend(_checked(str(entry["code"]), entry))
    return lines


def _checked(code: str, entry: dict[str, Any]) -> list[str]:
    """One engine call, then its answer compared (``saw`` prints the line above it)."""
    bound, _, expression = code.partition(" = ") if re.match(r"\w+ = ", code) else (
        "", "", code)
    if "raises" in entry:
        return [f"with raises({entry['raises']!r}):", f"    {code}"]
    if "answer" not in entry:  # a construction: not an answer
        return [f"{bound} = made({expression}, {bound!r})" if bound else code]
    if bound == "answer":  # a value read off the engine's state (Recorder.seen)
        return [code, f"saw(answer, {_literal(entry)})"]
    if bound:
        return [code, f"saw({bound}, {_literal(entry)}, {bound!r})"]
    return [f"answer = {expression}", f"saw(answer, {_literal(entry)})"]


def prelude_source() -> str:
    """The helpers every script carries (:mod:`kvoffload.conformance.target.engine_prelude`, from
    its marker on)."""
    text = inspect.getsource(engine_prelude)
    return text[text.index("# --- the reproducer's helpers"):]


def script_source(target: str, violation: PropertyViolation,
                  entries: list[dict[str, Any]]) -> str:
    """The standalone script of one failure, from its record."""
    engine = engine_of(target) or target
    imports = [str(e["import"]) for e in entries if "import" in e]
    carried = "\n\n".join(str(e["carry"]) for e in entries if "carry" in e)
    setup = "\n".join(str(e["setup"]) for e in entries if "setup" in e)
    notes = [str(e["note"]) for e in entries if "note" in e]
    failing = str(violation.trace[violation.step - 1]) if violation.step else ""
    trace = "\n".join(violation.trace_lines())
    note_text = "\n\n".join(textwrap.fill(n, 88) for n in notes)
    body = textwrap.indent("\n".join(_body(entries)), "    ")
    return f'''"""{engine}: {violation.prop!r} diverges from the kvoffload spec, in its own API.

Found by `kvoffload check {target}`: {describe(violation.prop)}.
{textwrap.fill(violation.message, 88)}

The operations of the spec's API, as kvoffload made them (tier of {violation.capacity}):
{trace}

Below, each operation (``step``) is followed by exactly the {engine} calls kvoffload's
adapter made for it, and each call's answer is compared with the answer {engine} gave
under kvoffload. Run it with plain `python` (no kvoffload needed). It prints every call
and answer, then the divergent operation's calls next to what the spec demands. Exit
status 1: {engine} answered every call as under kvoffload, so the divergence is its own;
0: some answer differs (not reproduced outside kvoffload).
{note_text}
"""

{prelude_source()}

{carried}

{setup}
{chr(10).join(dict.fromkeys(imports))}

SPEC = {violation.table()!r}


def main():
{body}
    return finish({failing!r}, SPEC, {engine!r})


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        import traceback

        traceback.print_exc()
        print("the script failed before it could compare the answers")
        status = 2
    sys.exit(status)
'''


def run_alone(path: Path, timeout: float) -> tuple[int | None, str, str]:
    """``python PATH`` in PATH's folder, in a fresh process with no PYTHONPATH (so nothing
    of kvoffload is put on its path): (exit status, None if it did not end within
    ``timeout``; stdout; stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run([sys.executable, str(path)], cwd=path.parent, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as late:
        out = late.stdout if isinstance(late.stdout, str) else ""
        return None, out, ""
    return done.returncode, done.stdout, done.stderr


def confirm(source: str, timeout: float = SCRIPT_TIMEOUT_S) -> tuple[bool, int | None, str]:
    """Run ``source`` alone (:func:`run_alone`): (reproduced, exit status, its output)."""
    with tempfile.TemporaryDirectory(prefix="kvoffload-engine-") as folder:
        path = Path(folder) / "reproduce_engine.py"
        path.write_text(source, encoding="utf-8")
        status, stdout, stderr = run_alone(path, timeout)
    if status is None:
        return False, None, stdout + f"\n(no end within {timeout:g} s)"
    output = stdout + (("\n" + stderr) if status not in (0, 1) else "")
    return status == 1 and "\nREPRODUCED:" in stdout, status, output


def engine_reproducer(target: str, config: CheckConfig,
                      violation: PropertyViolation) -> EngineReproducer | None:
    """The engine-native reproducer of one failure, confirmed in a fresh process; None
    for a target that is not an engine."""
    if engine_of(target) is None:
        return None
    begun = time.perf_counter()
    entries, _ = record(target, config, violation)
    source = script_source(target, violation, entries)
    reproduced, status, output = confirm(source)
    return EngineReproducer(source, reproduced, status, output,
                            round(time.perf_counter() - begun, 3))
