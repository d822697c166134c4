import ctypes
import time

import pytest

from customgrad import _bridge, _interrupts


@pytest.fixture
def r_flags(monkeypatch):
    """Stand-ins for R's R_interrupts_suspended and R_interrupts_pending."""
    suspended, pending = ctypes.c_int(0), ctypes.c_int(0)
    saved = dict(_interrupts._flags)
    _interrupts.use_flags(suspended, pending)
    yield suspended, pending
    _interrupts._flags.update(saved)


def test_r_interrupts_are_held_while_r_runs_and_restored_after(r_flags):
    suspended, pending = r_flags
    seen = []
    _bridge.call_r(lambda: seen.append(suspended.value))
    assert seen == [1]
    assert suspended.value == 0
    assert pending.value == 0


def test_an_interrupt_that_came_while_r_ran_is_raised_when_it_returns(r_flags):
    suspended, pending = r_flags

    def interrupted():
        pending.value = 1
        return "value"

    with pytest.raises(KeyboardInterrupt) as caught:
        _bridge.call_r(interrupted)
    assert caught.value.customgrad_stop
    # Taken here, so R won't signal it again.
    assert pending.value == 0
    assert suspended.value == 0


def test_a_nested_call_leaves_the_interrupt_to_the_outer_one(r_flags):
    suspended, pending = r_flags
    inner_state = []

    def inner():
        pending.value = 1

    def outer():
        _bridge.call_r(inner)
        inner_state.append((suspended.value, pending.value))

    with pytest.raises(KeyboardInterrupt):
        _bridge.call_r(outer)
    assert inner_state == [(1, 1)]
    assert (suspended.value, pending.value) == (0, 0)


def test_an_interrupt_while_r_suspends_them_itself_is_left_to_r(r_flags):
    suspended, pending = r_flags
    suspended.value = 1  # as in R's suspendInterrupts()

    def interrupted():
        pending.value = 1

    _bridge.call_r(interrupted)
    assert (suspended.value, pending.value) == (1, 1)


def test_an_interrupt_wins_over_an_error_in_flight(r_flags):
    _, pending = r_flags

    def fails():
        pending.value = 1
        raise ValueError("from R")

    with pytest.raises(KeyboardInterrupt) as caught:
        _bridge.call_r(fails)
    assert isinstance(caught.value.__context__, ValueError)


def test_a_long_call_is_let_go_and_a_short_one_is_not(r_flags):
    suspended, _ = r_flags
    seen = []

    def long_call():
        # The watchdog's poll, as if half a second had passed.
        _interrupts.let_go_if_held_past(time.monotonic() + _interrupts.HOLD_SECONDS)
        seen.append(suspended.value)
        # R's garbage collector suspends interrupts and restores what it
        # saw: the hold, if it saw it; the next poll lets go again.
        suspended.value = 1
        _interrupts.let_go_if_held_past(time.monotonic() + _interrupts.HOLD_SECONDS)
        seen.append(suspended.value)

    def short_call():
        _interrupts.let_go_if_held_past(time.monotonic())
        seen.append(suspended.value)

    _bridge.call_r(long_call)
    _bridge.call_r(short_call)
    assert seen == [0, 0, 1]
    assert suspended.value == 0


def test_outside_r_nothing_is_held(monkeypatch):
    monkeypatch.setattr(
        _interrupts, "_flags", {"suspended": None, "pending": None, "looked_up": True}
    )
    assert _bridge.call_r(lambda: "value") == "value"
    assert _interrupts._holds == []


class _Library:
    """A stand-in for a loaded library that exports R's two flags."""

    def __init__(self):
        self.flags = {
            "R_interrupts_suspended": ctypes.c_int(0),
            "R_interrupts_pending": ctypes.c_int(0),
        }


def _fake_loading(monkeypatch, libraries):
    """``ctypes.CDLL(path)`` finds ``libraries[path]`` (a :class:`_Library`),
    and fails for any other path, as on Windows for None (the process)."""

    def cdll(path):
        if path not in libraries:
            raise TypeError("no such library")  # what Windows raises for None
        return libraries[path]

    def in_dll(cls, library, name):
        if name not in library.flags:
            raise ValueError(f"symbol {name} not found")
        return library.flags[name]

    monkeypatch.setattr(_interrupts.ctypes, "CDLL", cdll)
    monkeypatch.setattr(_interrupts.ctypes.c_int, "in_dll", classmethod(in_dll))
    saved = dict(_interrupts._flags), list(_interrupts._r_libraries)
    monkeypatch.setattr(_interrupts, "_flags", saved[0])
    monkeypatch.setattr(_interrupts, "_r_libraries", saved[1])


def test_without_r_in_the_process_table_the_flags_are_found_in_rs_library(monkeypatch):
    # Windows (no table of the process's symbols) or an embedding program
    # that loaded libR privately: R hands over its library's path.
    r_dll = _Library()
    _fake_loading(monkeypatch, {"C:/R/bin/x64/R.dll": r_dll})
    _interrupts.set_r_library(["C:/R/bin/x64/R.dll"])
    assert _interrupts._r_flags() is not None
    suspended = r_dll.flags["R_interrupts_suspended"]
    seen = []
    _bridge.call_r(lambda: seen.append(suspended.value))
    assert seen == [1] and suspended.value == 0


def test_the_process_table_comes_first(monkeypatch):
    # Linux and macOS: R's executable (or a libR loaded globally) exports them.
    process, library = _Library(), _Library()
    _fake_loading(monkeypatch, {None: process, "/usr/lib/R/lib/libR.so": library})
    _interrupts.set_r_library(["/usr/lib/R/lib/libR.so"])
    assert _interrupts._r_flags()[0] is process.flags["R_interrupts_suspended"]


def test_where_no_library_has_the_flags_nothing_is_held(monkeypatch):
    stripped = _Library()
    stripped.flags.clear()  # a library without R's symbols
    _fake_loading(monkeypatch, {"/opt/R/lib/libR.dylib": stripped})
    _interrupts.set_r_library(["/opt/R/lib/libR.dylib", "/missing/R.dll"])
    assert _interrupts._r_flags() is None
    assert _bridge.call_r(lambda: "value") == "value"
    assert _interrupts._holds == []

