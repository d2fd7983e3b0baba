"""``kvoffload check`` and what it leaves behind.

The command's run (:mod:`.check_command`), one check from start to verdict
(:mod:`.runner`, with Hypothesis's example database, :mod:`.examples_db`), the
progress line (:mod:`.progress`) and the reports: text, report.json, reproducers,
JUnit XML (:mod:`.report`). The command line itself is
:mod:`kvoffload.conformance.cli`; the options table both front ends read is
:mod:`kvoffload.conformance.options`.

Engine-native reproducers, a failure in the engine's own API
(:mod:`.engine_script`).
"""
