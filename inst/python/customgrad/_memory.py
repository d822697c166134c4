"""Keep the memory of tensors that R holds bounded.

A Python object referenced from R is released only when R's garbage
collector finalises the reference, and R does not know how large the tensor
behind it is: temporaries made from R (``1 + e``, ``op_exp(x)``) pile up, and
every new op allocates fresh memory.  So R is asked to collect (a callback
into R running a minor ``gc()``, a few ms) when, since the last collection,
either the tensors handed to R through the bridge or the memory the
process has allocated have grown past a threshold.  The second covers what
the bridge never sees: the tensors that keras3's ``op_*()`` functions hand
to R inside ``f`` and ``grad``, and the temporaries of the R code around
the calls.  Three measures, any of which can make a collection due: glibc's
count of bytes in use (``mallinfo2()``), which falls when R's collection
frees tensors (PyTorch's and JAX's CPU tensors live there), read at most
every 50 ms because it walks the allocator's free lists (over 1 ms in an R
process); TensorFlow's own allocator's count (~2 us); and the
resident set from ``/proc/self/statm``, which sees every allocator but
stays high on their free lists, so garbage piles up further before it
moves.  Where none can be read, only the bridge's bytes count.

Where it collects matters: objects alive during a collection are promoted
to an older generation that R collects far less often. So passing the
threshold only marks a collection as due, and it runs at the next boundary
(the start of a custom-gradient call), when the previous step's temporaries
are garbage; ops alone collect at four times the threshold.  Promotion
still happens: the frames of the R code running at the collection (a
loop's step, ``op_sum(f(x))``'s argument) are alive, so the values they
receive afterwards (the step's value and gradient), and the loop's last
gradient, are kept by a minor collection, about one step's results each
time, until R's next level-1 collection (every 21st; every 126th is a full
one, ~135 ms in an R session with Keras, whoever asks for it).  That keeps
about 20 steps' results at most, which is cheap for small tensors and not
for large ones.  So R runs a full collection when the minor one kept more
than half the threshold of what came into use since the collection
before, by the count of the allocator that holds the tensors
(TensorFlow's, glibc's elsewhere; the resident set does not fall when
memory is freed), or when that count grew eight thresholds past the level
after the last full collection.  And like R's own heap limits, the
growth that makes a collection due adapts: it doubles after each
collection that needed no full one, up to four thresholds, and is back at
the threshold after a full one.  At 1e7 elements a collection keeps
40-120 MB, every one is full, and the loop peaks within 2x the memory of
the same loop in Python; at 1e6 a collection keeps 4-12 MB, R's own
level-1 collections release it, and collections come every 30-40 steps,
so that R's schedule of full ones rarely falls inside a loop
(bench/results/2026-11-history.md).
"""

import threading
import time

from customgrad import _backend, _interrupts

_MAIN = threading.main_thread()

_state = {
    "bytes": 0,
    "threshold": 64 * 2**20,  # the option's
    "due_at": 64 * 2**20,  # the growth that makes a collection due (above)
    "collect": None,
    "collections": 0,
    "full_collections": 0,
    "seconds": 0.0,  # spent in collections, finalizers included
    "memory_base": None,  # _memory_now() after the last collection
    "full_base": None,  # _memory_now() after the last full collection
}


def _glibc_in_use():
    """A function giving the bytes glibc has handed out, or None."""
    import ctypes
    import ctypes.util

    class _MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
            )
        ]  # fmt: skip

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2

    def in_use():
        info = mallinfo2()
        return info.uordblks + info.hblkhd  # heap chunks + mmapped chunks

    # mallinfo2() walks glibc's free lists: ~1 us in a fresh process, but
    # over 1 ms in an R process full of freed memory. Read it at most every
    # 50 ms (the other measures are read at every call).
    return _at_most_every(in_use, 0.05)


def _at_most_every(measure, seconds):
    """``measure``, read again only when ``seconds`` have passed since the
    last reading (the last value otherwise)."""
    last = {"time": -1e9, "value": 0}

    def throttled(fresh=False):
        now = time.monotonic()
        if fresh or now - last["time"] >= seconds:
            last["time"] = now
            last["value"] = measure()
        return last["value"]

    return throttled


def _statm_rss():
    """A function giving the resident set in bytes, or None."""
    import os

    try:  # kept open: a pread() of it costs ~1 us
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        page = os.sysconf("SC_PAGE_SIZE")
    except (OSError, AttributeError, ValueError):
        return None
    return lambda fresh=False: int(os.pread(fd, 64, 0).split()[1]) * page


_measures = None  # the readers that work here, found at the first reading
_in_use = None  # for each reader: whether its count falls when memory is freed


def _memory_now(fresh=False):
    """The process's memory by each measure (see above), or None;
    ``fresh``: every measure read now (a collection has just run)."""
    global _measures, _in_use
    if _measures is None:
        # Not at import: reading TensorFlow's allocator starts its runtime,
        # and this module is imported with Keras, while use_distributed()
        # may still be arranging TensorFlow's devices.
        # The resident set and TensorFlow's count cost ~2 us a reading (a
        # pread, a call into TensorFlow): at most one a millisecond, where a
        # small function's call takes ~0.1 ms and no step allocates a
        # threshold's worth (glibc's is throttled itself).
        rss, allocator = _statm_rss(), _backend.adapter().allocator_in_use()
        found = [
            # TensorFlow's allocator gets its pool from glibc, growing it by
            # doubling and never giving it back: in glibc's count, that
            # looks like garbage a collection kept.
            (_glibc_in_use(), allocator is None),
            (rss and _at_most_every(rss, 0.001), False),
            (allocator and _at_most_every(allocator, 0.001), True),
        ]
        _measures = [m for m, _ in found if m is not None]
        _in_use = [in_use for m, in_use in found if m is not None]
    if not _measures:
        return None
    return [measure(fresh) for measure in _measures]


def _past_threshold(now, base):
    return any(m - b > _state["due_at"] for m, b in zip(now, base))


def _memory_grew():
    """Whether memory grew past the threshold by either measure since the
    last collection (the first call only takes the baseline)."""
    now = _memory_now()
    if now is None:
        return False
    base = _state["memory_base"]
    if base is None:
        _state["memory_base"] = _state["full_base"] = now
        return False
    return _past_threshold(now, base)


def set_collector(collect, threshold_bytes):
    """Register R's collector callback, ``collect(full)``, and the
    threshold in bytes."""
    _state["collect"] = collect
    _state["threshold"] = _state["due_at"] = int(threshold_bytes)
    _state["bytes"] = 0
    _state["memory_base"] = None
    _state["full_base"] = None


def stats():
    """Bytes counted since the last collection, collections so far (all,
    and full ones), and the seconds they took: R's collector and the
    finalizers it runs, which release the Python objects (R's own
    ``gc.time()`` leaves those out, and freeing a step's tensors can take
    longer than the collection itself)."""
    return {
        "bytes": _state["bytes"],
        "collections": _state["collections"],
        "full_collections": _state["full_collections"],
        "seconds": _state["seconds"],
    }


def handed_to_r(x):
    """Count ``x`` (a tensor or a nest of them) as held by R; return it."""
    _state["bytes"] += _nbytes(x)
    if _state["bytes"] > 4 * _state["due_at"]:
        _collect()
    return x


def at_boundary():
    """Collect now if a collection is due (called where little is alive)."""
    if _state["bytes"] > _state["due_at"] or _memory_grew():
        _collect()


def _collect():
    # R runs on the main thread only (a call from a tf.data map or a
    # backward thread waits for the next boundary there).
    if _state["collect"] is None or threading.current_thread() is not _MAIN:
        return
    _state["bytes"] = 0
    _state["collections"] += 1
    started = time.perf_counter()
    with _interrupts.held():
        _state["collect"](False)
        now = _memory_now(fresh=True)
        threshold = _state["threshold"]
        if now is not None and _full_due(now):
            _state["full_collections"] += 1
            _state["collect"](True)
            now = _state["full_base"] = _memory_now(fresh=True)
            _state["due_at"] = threshold
        else:
            _state["due_at"] = min(2 * _state["due_at"], 4 * threshold)
        if _state["full_base"] is None:  # collected before any baseline
            _state["full_base"] = now
        _state["memory_base"] = now
    _state["seconds"] += time.perf_counter() - started


def _full_due(now):
    """Whether the minor collection just run kept too much (see above):
    more than half the threshold of the memory in use since the collection
    before, or eight thresholds since the last full one."""
    base, full_base = _state["memory_base"], _state["full_base"]
    if base is None or full_base is None:
        return False
    threshold = _state["threshold"]
    return any(
        in_use and (m - b > threshold / 2 or m - f > 8 * threshold)
        for m, b, f, in_use in zip(now, base, full_base, _in_use)
    )


def count_args(args):
    """Count the arguments of an R callback as handed to R."""
    total = 0
    for a in args:
        total += _nbytes(a)
    _state["bytes"] += total


_leaf_nbytes = _backend.adapter().nbytes


def _nbytes(x):
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    return _leaf_nbytes(x)
