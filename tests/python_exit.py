"""A forked child ended as ``python`` ends, without the interpreter's teardown.

The zygotes' children (tests/zygote.py's scripts, tests/host_zygote.py's hosts) are forks
of a process that has imported much and called :func:`gc.freeze`. Ending one as a fresh
interpreter ends (``sys.exit`` out of ``__main__``) runs the interpreter's teardown, which
frees every module and object, so in a fork writes to (copies) every page of the
preloaded ones: about 0.3 s of CPU per child of the LMCache zygote, 13 ms per plain
host (15 against 2 ms for ``os._exit`` in a fork of a host zygote), more than many a
child's own work. :func:`end_as_python` runs the child's ``__main__`` and ends it as
``python`` would, but for that teardown: an uncaught exception's traceback (status 1),
non-daemon threads joined (and :mod:`threading`'s own exit calls), ``atexit`` handlers
run, the standard streams flushed, the exit status python gives (death by SIGINT after
an uncaught KeyboardInterrupt), then :func:`os._exit`, as :mod:`multiprocessing`'s
forked children end. What it skips: the finalizers of objects still alive at the
teardown (``__del__``, weakref callbacks), which python does not promise to run.

Standard library only, and no ``from __future__`` import: the zygotes' servers (no
``PYTHONPATH``) run this module's source as the first part of their own.
"""

import os
import sys
import threading
from collections.abc import Callable


def exit_status(code: object) -> int:
    """The exit status ``python`` gives ``SystemExit(code)`` (writing a non-integer code
    to stderr, as it does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if -(1 << 63) <= code < (1 << 63) else 0xFF
    print(code, file=sys.stderr)
    return 1


def end_as_python(main: Callable[[], object]) -> None:
    """Run ``main`` (the child's ``__main__``) and end the process as ``python`` ends
    after its ``__main__``, without the teardown (the module's docstring); never returns."""
    import atexit
    import signal

    try:
        main()
        status = 0
    except SystemExit as stop:
        status = exit_status(stop.code)
    except BaseException as error:
        sys.excepthook(type(error), error, error.__traceback__)
        status = -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1
    threading._shutdown()  # type: ignore[attr-defined]  # what python calls at its exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: python was started with that descriptor closed
                stream.flush()
        except Exception:  # as python's exit status 120, unless a signal ends it
            status = 120 if status >= 0 else status
    if status < 0:  # as python ends after an uncaught KeyboardInterrupt: of the signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)
