"""The ``kvoffload`` command line: ``kvoffload check`` (the conformance suite) and
``kvoffload demo`` (the spec's scenarios).

``kvoffload check`` exits 0 when the target conforms, 1 when a property fails, 2 when
the run could not be made as asked (bad option, unloadable target, no adapter fits,
unwritable output), 130 when interrupted (Ctrl-C), with a one-line reason. The target
runs in a host process of its own (:mod:`.target.remote`, :mod:`.target.host`): whatever it does
there, the verdict is the judge's. ``kvoffload corpus replay`` runs its target in a
child process (:mod:`.target.isolation`): a target that ends the process itself gets 1 if it
was being checked, 2 if it was being loaded, never 0. When the reader of standard
output or standard error goes away (``kvoffload check | head``), the rest of that output
is dropped and the run goes on: the exit status and the report are still the run's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

# Only the standard library at the top: a Ctrl-C in the command's first moments comes
# while this module is imported, before entry() can answer it with 130. The spec and
# the commands' own modules (Hypothesis among them, about 0.3 s) are imported in the
# functions: ``kvoffload check`` starts its target's host first, so that the host's
# start-up runs while the judge imports them (:func:`_start_host_early`).


def _demo(args: argparse.Namespace) -> int:
    """Play the spec's scenario vectors and show each call with the spec's output."""
    from kvoffload.spec import MisuseError, check_invariants, initial_state
    from kvoffload.spec.calls import apply
    from kvoffload.spec.scenarios import SCENARIOS

    names = {s.name for s in SCENARIOS}
    unknown = [n for n in args.scenario if n not in names]
    if unknown:
        print(f"kvoffload demo: unknown scenario {unknown}; known: {sorted(names)}",
              file=sys.stderr)
        return 2
    failed = 0
    for scenario in SCENARIOS:
        if args.scenario and scenario.name not in args.scenario:
            continue
        print(f"# {scenario.name}: {scenario.about} "
              f"(capacity {scenario.capacity}, {scenario.policy.value})")
        state = initial_state(scenario.capacity, scenario.policy)
        for step in scenario.steps:
            output: object
            try:
                state, output = apply(state, step.call)
            except MisuseError as error:
                output = type(error)
            check_invariants(state)
            shown = output.__name__ if isinstance(output, type) else repr(output)
            ok = output == step.expect
            failed += not ok
            print(f"  {'ok ' if ok else 'BAD'} {step.call!s:<40} -> {shown}")
    print("all scenarios agree with the spec" if not failed else f"{failed} steps disagree")
    return 1 if failed else 0


def _run_traffic(args: argparse.Namespace) -> int:
    from .traffic.command import run_traffic_command

    return run_traffic_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    from kvoffload.spec import ASSUMPTIONS

    from .command.check_command import EXIT_STATUS, add_check_arguments, run_check_command
    from .corpus.corpus_command import add_corpus_arguments, run_corpus_command

    args_given = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="kvoffload", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="play the spec's scenarios (PR #41795 first)")
    demo.add_argument("scenario", nargs="*", help="scenario names (default: all)")
    demo.set_defaults(run=_demo)
    check = sub.add_parser(
        "check", help="check a manager against the spec (default: the reference manager)",
        description="Drive TARGET and the spec in lockstep with generated calls and compare "
        "every observable output; on a failure, print the shrunk trace and write a "
        "reproducer. Assumptions: " + "; ".join(f"{a.name}: never {a.never}"
                                                for a in ASSUMPTIONS.values()),
        epilog=EXIT_STATUS[0].upper() + EXIT_STATUS[1:] + ".")
    add_check_arguments(check)
    check.set_defaults(run=run_check_command)
    corpus = sub.add_parser("corpus", help="write the JSON trace corpus, or replay it "
                            "against a TARGET (docs/corpus.md)")
    add_corpus_arguments(corpus)
    corpus.set_defaults(run=run_corpus_command)
    traffic = sub.add_parser("traffic", help="serve request traces (Mooncake's) through the "
                             "reference tier: hit rates, in-flight lookups (docs/traffic.md)")
    if "traffic" in args_given:
        # Only a command line that names it can choose it (a sub-command is its exact
        # name): its options and its modules (the simulator, the traces, the reference
        # manager: about 25 ms) are not made for the other commands.
        from .traffic.command import add_traffic_arguments

        add_traffic_arguments(traffic)
    traffic.set_defaults(run=_run_traffic)
    args = parser.parse_args(args_given)
    result: int = args.run(args)
    return result


class _OutputOrNothing:
    """An output stream that outlives its reader: once a write or a flush finds the pipe
    closed (``| head``), the stream is pointed at the null device and the rest of the
    output is dropped, so the run finishes and reports its verdict. Everything else is
    the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop_the_rest()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        """Point the stream's descriptor at the null device: what is still buffered, and
        all that follows, is written there (no error at the interpreter's exit either)."""
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _fill_closed_descriptors() -> None:
    """Started with descriptor 0, 1 or 2 closed (``>&-``): point it at the null device,
    so that no pipe to a host is given that number (a host would inherit it as its
    standard error). Python's stream for it stays None: nothing is printed there."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:  # a lower one was closed too: it is filled first, in order
                os.dup2(null, fd)
                os.close(null)


_NO_PYTHON_HOST = ("--i", "--ex", "--sel", "exec:", "-h", "--h")
"""``kvoffload check`` arguments after which the run may need no Python host, by the
shortest prefix argparse expands to each: ``--in-process``, ``--exec``, an ``exec:``
TARGET, ``--self-test`` (``--se`` is ``--seed`` too), help."""


def _start_host_early(args: Sequence[str]) -> None:
    """``kvoffload check`` of a Python target: start its host now (:func:`.remote.
    prestart`), so that the host's own start-up (the interpreter, its imports) runs
    while this process imports the command's modules; the run takes it if nothing it
    depends on changed meanwhile, and a host nobody took ends with the judge."""
    if os.environ.get("KVOFFLOAD_IN_PROCESS") == "1" or any(
            arg.startswith(_NO_PYTHON_HOST) for arg in args):
        return
    from .target.remote import prestart

    prestart()


def entry() -> int:
    """The ``kvoffload`` command: :func:`main` in a child process, so that no way a
    target ends the process passes for a verdict (:mod:`.target.isolation`), with standard
    output and standard error that survive their reader (:class:`_OutputOrNothing`)."""
    _fill_closed_descriptors()
    if sys.stdout is not None:  # None: started with the descriptor closed (print skips it)
        sys.stdout = _OutputOrNothing(sys.stdout)
    if sys.stderr is not None:
        sys.stderr = _OutputOrNothing(sys.stderr)
    if sys.argv[1:2] == ["check"]:  # the judge: targets run in hosts (or --in-process)
        try:
            _start_host_early(sys.argv[2:])
            return main()
        except KeyboardInterrupt:  # Ctrl-C before the run's own handler is installed
            print("kvoffload: interrupted by Ctrl-C", file=sys.stderr)
            return 130
    from .target.isolation import run_isolated

    return run_isolated(main, exit_normally=True)


if __name__ == "__main__":
    sys.exit(entry())
