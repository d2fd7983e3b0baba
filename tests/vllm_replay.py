"""Replaying docs/engines.md's recorded vLLM counterexamples, without pytest.

:func:`replay_recorded` runs in the tests' process and in the ``python -O`` interpreter
test_vllm_engines.py starts for the counterexamples found under ``-O``: that one imports
this module alone of the tests' helpers, not :mod:`vllm_releases`, whose pytest import
cost it about 0.2 s of CPU (1.3 s where no ``-O`` bytecode of pytest is cached yet, as in
a fresh CI environment)."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _engine_cases() -> dict[str, dict[str, Any]]:
    """The corpus's engines cases by name, made once per process (each is only read)."""
    from kvoffload.conformance.corpus.corpus import engine_cases

    return {c["name"]: c for c in engine_cases()}


def replay_recorded(entry: dict[str, Any]) -> str:
    """Replay one of docs/engines.md's recorded counterexamples (an entry of
    ``corpus_engines.json``) as its corpus case, against its own release under its run's
    options, judged by ``kvoffload corpus replay``'s lockstep: ``"failed"``,
    ``"passed"``, or ``"skipped"`` where the case does not apply to those options."""
    from kvoffload.conformance.config import CheckConfig
    from kvoffload.conformance.corpus.corpus_replay import applies, replay_case
    from kvoffload.conformance.target.targets import prepare

    config = CheckConfig.from_options(profile=entry["profile"], policy=entry["policy"],
                                      level=entry["level"], assume=entry["assume"])
    case = _engine_cases()[f"engines-{entry['name']}"]
    prepared = prepare(f"vllm=={entry['release']}", config)
    if applies(case, config, prepared.capabilities) is not None:
        return "skipped"
    found = replay_case(case, prepared.make_adapter, config)
    if isinstance(found, str):
        return "skipped"
    return "passed" if found is None else "failed"
