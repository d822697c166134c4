"""R's interrupts and time limits while R runs inside a backend's call.

reticulate evaluates some R code straight from its C++ (to wrap each Python
callable it hands to R, for one). An interrupt or a time limit that R takes
there jumps over reticulate's release of Python's GIL: the return into
Python then waits for the GIL forever, or the process crashes. So R holds
them while it runs a callback (R's own ``R_interrupts_suspended`` flag, as
``suspendInterrupts()`` sets it), and an interrupt that came meanwhile is
raised here, as a ``KeyboardInterrupt``, when the callback is done.

A callback still running after ``HOLD_SECONDS`` (R code that loops or
waits) is let go by a watchdog thread: R then takes interrupts and time
limits at once there, as it does everywhere else (R code that suspends
them itself, with ``suspendInterrupts()``, is let go too).

R's flags are found among the symbols the process exports (R's executable,
or a libR it loaded globally: Linux, macOS), else in R's shared library,
whose path R hands over (:func:`set_r_library`: ``R.dll`` on Windows, where
a process has no such table; ``libR.dylib`` or ``libR.so`` where an
embedding program loaded it privately). Where neither has them, nothing is
held: R takes interrupts inside callbacks as it would without customgrad.
"""

import ctypes
import threading
import time

HOLD_SECONDS = 0.5
_POLL_SECONDS = 0.1

_flags = {"suspended": None, "pending": None, "looked_up": False}
_r_libraries = []  # paths of R's shared library, from R
_holds = []  # when each call into R in progress began, innermost last
_holding = threading.Event()
_watchdog = []


def set_r_library(paths):
    """Where R's shared library is (R calls this once): the flags are
    looked for there too (see the module's docstring)."""
    _r_libraries[:] = list(paths)
    _flags.update(suspended=None, pending=None, looked_up=False)


def _r_flags():
    """R's ``(R_interrupts_suspended, R_interrupts_pending)``, or None
    outside an R process (Python's tests) and where they can't be found."""
    if not _flags["looked_up"]:
        _flags["looked_up"] = True
        for path in [None, *_r_libraries]:
            try:
                library = ctypes.CDLL(path)
                suspended = ctypes.c_int.in_dll(library, "R_interrupts_suspended")
                pending = ctypes.c_int.in_dll(library, "R_interrupts_pending")
            except (OSError, ValueError, TypeError):
                continue  # not there (Windows has no table for None)
            _flags.update(suspended=suspended, pending=pending)
            break
    if _flags["suspended"] is None:
        return None
    return _flags["suspended"], _flags["pending"]


def use_flags(suspended, pending):
    """Use these ``ctypes.c_int`` for R's flags (Python's tests)."""
    _flags.update(suspended=suspended, pending=pending, looked_up=True)


class held:
    """``with held():`` around a call into R (see the module's docstring)."""

    __slots__ = ("previous",)

    def __enter__(self):
        flags = _r_flags()
        if flags is None:
            self.previous = None
            return self
        self.previous = flags[0].value
        flags[0].value = 1
        _holds.append(time.monotonic())
        if not _watchdog:
            _start_watchdog()
        _holding.set()
        return self

    def __exit__(self, *exc_info):
        if self.previous is None:
            return False
        suspended, pending = _r_flags()
        _holds.pop()
        if not _holds:
            _holding.clear()
        suspended.value = self.previous
        if pending.value and not self.previous:
            # R's turn to take it has passed; an outer hold (or R's own
            # suspendInterrupts()) leaves it to R.
            pending.value = 0
            raise KeyboardInterrupt
        return False


def _start_watchdog():
    thread = threading.Thread(target=_watch, name="customgrad-interrupts", daemon=True)
    _watchdog.append(thread)
    thread.start()


def _watch():
    while True:
        _holding.wait()
        time.sleep(_POLL_SECONDS)
        let_go_if_held_past(time.monotonic())


def let_go_if_held_past(now):
    """Let R take interrupts if the innermost hold began ``HOLD_SECONDS``
    before ``now``: at every poll, since R suspends interrupts for its own
    work (a garbage collection) and then restores the value it saw, which
    may be the hold's."""
    began = (_holds[-1:] or [None])[0]
    if began is not None and now - began >= HOLD_SECONDS:
        _flags["suspended"].value = 0
