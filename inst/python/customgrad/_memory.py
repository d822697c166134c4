"""Keep the memory of tensors that R holds bounded, on every platform.

A Python object referenced from R is released only when R's garbage
collector finalises the reference, and R does not know how large the
tensor behind it is: a loop's gradients and temporaries pile up. So R is
asked to collect (a callback into R running a minor ``gc()``, a few ms)
when, since the last collection, either of two counts grew past the
threshold:

* the bytes of the tensors customgrad handed to R (it knows each size);
* the memory where the tensors live, as the backend counts it for its
  default device (TensorFlow's ``get_memory_info()``, PyTorch's CUDA or
  MPS allocator, JAX's ``memory_stats()``, or its live arrays on a CPU).
  It also sees what customgrad never hands over: the tensors keras3's
  ``op_*()`` and the backend's own gradient functions return to R. On a
  CPU, where PyTorch counts nothing (nor TensorFlow, without its
  allocator's statistics), glibc's count of bytes in use (``mallinfo2()``,
  Linux only) stands in for it; elsewhere the first count bounds R alone.

Passing the threshold marks a collection as due. Where it runs matters:
a collection promotes what the R code running at that moment holds, and
R keeps it until its next level-1 collection where that code's frames
are not emptied when they return (those that called a Python function
through reticulate, keras3's ``op_*()`` among them: bench/retention.R).
Every path that hands R a tensor reaches such a boundary next. So a due
collection runs at the next boundary where R binds nothing of the call
afterwards:

* the start of a custom gradient's rule, in the backend's backward pass
  (:func:`at_backward`), where the step's forward R code has returned.
  JAX traces the rule with the forward pass, inside that code: in an
  eager gradient, the rule's trace tells :func:`rule_traced`, and where a
  collection is due it calls :func:`at_backward` from a callback that JAX
  runs in the backward pass;
* the start of a custom-gradient call, unless a rule ran on R's thread
  since a call's start last collected: then only past twice the
  threshold (a call whose rule never comes), and calls' starts collect
  again until a rule runs (a call's value is often computed as another
  function's argument, ``op_sum(f(x))``: collected there, R would keep
  it);
* for a call R made into an ``op_grad()`` or ``op_compile()`` function,
  R's next such call (``collect_deferred()``), after this one's result is
  counted; the rules inside the call do not collect. A due boundary after
  that collects at once.

Collections are minor ones; R's own level-1 collections free what they
promoted. (A full one after a minor one that kept much freed nothing more
in bench/README.md's ablations, and cost a full ``gc()``.)
"""

import threading
import time

from customgrad import _backend, _interrupts

_MAIN = threading.main_thread()

_state = {
    "bytes": 0,
    "threshold": 64 * 2**20,  # the option's
    "collect": None,
    "defer": None,  # tells R to collect before its next call (or None)
    "deferred": False,  # R was told and has not collected yet
    "collections": 0,
    "seconds": 0.0,  # spent in collections, finalizers included
    "memory_base": None,  # the memory count after the last collection
    "backward_expected": False,  # a rule ran since the last forward collection
    "calls_from_r": 0,  # op_grad() / op_compile() calls in progress
}


def _glibc_in_use():
    """A function giving the bytes glibc has handed out, or None (not on
    Linux, or a C library without ``mallinfo2()``)."""
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

    return in_use


def _at_most_every(measure, seconds):
    """``measure``, read again only when ``seconds`` have passed since the
    last reading (the last value otherwise), or at once with ``fresh``."""
    last = {"time": -1e9, "value": 0}

    def throttled(fresh=False):
        now = time.monotonic()
        if fresh or now - last["time"] >= seconds:
            last["time"] = now
            last["value"] = measure()
        return last["value"]

    return throttled


def _find_memory_reader():
    """The reader of the memory count (see above), or None."""
    device = _backend.adapter().device_memory_in_use()
    if device is not None:
        # ~2 us a reading: at most one a millisecond (or as the reader
        # says), where a small function's call takes ~0.1 ms and no step
        # allocates a threshold.
        return _at_most_every(device, getattr(device, "seconds", 0.001))
    host = _glibc_in_use()
    if host is not None:
        # mallinfo2() walks glibc's free lists: over 1 ms in an R process
        # full of freed memory.
        return _at_most_every(host, 0.05)
    return None


_reader = []  # found at the first reading (empty: not yet)


def _memory_now(fresh=False):
    """The memory count, or None where there is none; ``fresh``: read now
    (a collection has just run)."""
    if not _reader:
        # Not at import: reading TensorFlow's allocator starts its runtime,
        # and this module is imported with Keras, while use_distributed()
        # may still be arranging TensorFlow's devices.
        _reader.append(_find_memory_reader())
    return None if _reader[0] is None else _reader[0](fresh)


def _memory_grew(factor=1):
    """Whether the memory count grew past ``factor`` times the threshold
    since the last collection (the first call only takes the baseline)."""
    now = _memory_now()
    if now is None:
        return False
    if _state["memory_base"] is None:
        _state["memory_base"] = now
        return False
    return now - _state["memory_base"] > factor * _state["threshold"]


def _due(factor=1):
    threshold = factor * _state["threshold"]
    return _state["bytes"] > threshold or _memory_grew(factor)


def set_collector(collect, threshold_bytes, defer=None):
    """Register R's collector callback, ``collect()``, the threshold in
    bytes, and ``defer()``, which tells R to call :func:`collect_deferred`
    before its next call into Python."""
    _state["collect"] = collect
    _state["defer"] = defer
    _state["deferred"] = False
    _state["threshold"] = int(threshold_bytes)
    _state["bytes"] = 0
    _state["memory_base"] = None
    _state["backward_expected"] = False


def stats():
    """Bytes counted since the last collection, collections so far, and
    the seconds they took: R's collector and the finalizers it runs, which
    release the Python objects (R's own ``gc.time()`` leaves those out, and
    freeing a step's tensors can take longer than the collection itself)."""
    return {
        "bytes": _state["bytes"],
        "collections": _state["collections"],
        "seconds": _state["seconds"],
    }


def handed_to_r(x):
    """Count ``x`` (a tensor or a nest of them) as held by R; return it.
    The next boundary collects if that made a collection due."""
    _state["bytes"] += _nbytes(x)
    return x


def call_from_r(fn, *args):
    """Run ``fn(*args)``, a call R made into an ``op_grad()`` or
    ``op_compile()`` function, and return its result, counted as held by
    R; then check for a due collection, which R runs before its next call.
    The rules run inside it do not collect: R binds the result after the
    call, in frames such a collection would promote. Checked after
    counting, so that a collection the result makes due is not one call
    late."""
    _state["calls_from_r"] += 1
    try:
        result = fn(*args)
    finally:
        _state["calls_from_r"] -= 1
    handed_to_r(result)
    at_boundary(from_r=True)
    return result


def at_boundary(from_r=False):
    """Collect if a collection is due: now; with ``from_r`` (a call R
    made) before R's next call, once; at the start of a custom-gradient
    call where a rule ran since a call's start last collected, at the next
    rule instead, unless twice due (a call whose rule never comes)."""
    if not _due():
        return
    if from_r and _state["defer"] is not None and not _state["deferred"]:
        _state["deferred"] = True
        _state["defer"]()
    elif not from_r and _state["backward_expected"] and not _due(2):
        return
    else:
        _state["backward_expected"] = False
        _collect()


def rule_traced():
    """A custom gradient's rule is to run in the backward pass (traced with
    the forward pass in JAX's eager gradients): later calls' starts leave
    due collections to rules. Whether the rule is to collect: a collection
    is due, and this is neither a call from R nor off R's thread (a
    device's backward thread), where the next boundary collects."""
    if _state["calls_from_r"] or threading.current_thread() is not _MAIN:
        return False
    _state["backward_expected"] = True
    return _due()


def at_backward():
    """A custom gradient's rule is about to run: collect if it is to
    (:func:`rule_traced`)."""
    if rule_traced():
        _collect()


def collect_deferred():
    """Run the collection R was told of, if it has not run since."""
    if _state["deferred"]:
        _collect()


def _collect():
    # R runs on the main thread only (a call from a tf.data map or a
    # backward thread waits for the next boundary there).
    if _state["collect"] is None or threading.current_thread() is not _MAIN:
        return
    _state["bytes"] = 0
    _state["deferred"] = False
    _state["collections"] += 1
    started = time.perf_counter()
    with _interrupts.held():
        _state["collect"]()
    _state["memory_base"] = _memory_now(fresh=True)
    _state["seconds"] += time.perf_counter() - started


def count_args(args):
    """Count the arguments of an R callback as handed to R."""
    total = 0
    for a in args:
        total += _nbytes(a)
    _state["bytes"] += total


def _nbytes(x):
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    return _leaf_nbytes(x)


def _leaf_nbytes(x):
    # The adapter's, found at the first call: at import, the adapter may
    # be importing this module (``import customgrad`` on TensorFlow).
    global _leaf_nbytes
    _leaf_nbytes = _backend.adapter().nbytes
    return _leaf_nbytes(x)
