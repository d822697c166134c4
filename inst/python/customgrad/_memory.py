"""Keep the memory of tensors that R holds bounded.

A Python object referenced from R is released only when R's garbage
collector finalises the reference, and R does not know how large the tensor
behind it is: temporaries made from R (``1 + e``, ``op_exp(x)``) pile up, and
every new op allocates fresh memory.  So R is asked to collect (a callback
into R running a minor ``gc()``, a few ms) when, since the last collection,
either the tensors handed to R through the bridge or the process's resident
memory have grown past a threshold.  The second covers what the bridge
never sees: the tensors that keras3's ``op_*()`` functions hand to R inside
``f`` and ``grad`` (measured on Linux, from ``/proc/self/statm``; elsewhere
only the bridge's bytes count).

Where it collects matters: objects alive during a collection are promoted
to an older generation that R collects far less often. So passing the
threshold only marks a collection as due, and it runs at the next boundary
(the start of a custom-gradient call), when the previous step's temporaries
are garbage; ops alone collect at four times the threshold.
"""

import keras

_BACKEND = keras.config.backend()

_state = {
    "bytes": 0,
    "threshold": 128 * 2**20,
    "collect": None,
    "collections": 0,
    "rss_base": None,  # resident bytes after the last collection
}

try:  # kept open: a pread() of it costs ~1 us
    import os

    _STATM = os.open("/proc/self/statm", os.O_RDONLY)
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (OSError, AttributeError, ValueError):
    _STATM = None


def _rss():
    """The process's resident bytes, or None where they can't be read."""
    if _STATM is None:
        return None
    return int(os.pread(_STATM, 64, 0).split()[1]) * _PAGE


def _rss_grown():
    """Whether resident memory grew past the threshold since the last
    collection (the first call only takes the baseline)."""
    rss = _rss()
    if rss is None:
        return False
    if _state["rss_base"] is None:
        _state["rss_base"] = rss
        return False
    return rss - _state["rss_base"] > _state["threshold"]


def set_collector(collect, threshold_bytes):
    """Register R's collector callback and the threshold in bytes."""
    _state["collect"] = collect
    _state["threshold"] = int(threshold_bytes)
    _state["bytes"] = 0
    _state["rss_base"] = None


def stats():
    """Bytes counted since the last collection, and collections so far."""
    return {"bytes": _state["bytes"], "collections": _state["collections"]}


def handed_to_r(x):
    """Count ``x`` (a tensor or a nest of them) as held by R; return it."""
    _state["bytes"] += _nbytes(x)
    if _state["bytes"] > 4 * _state["threshold"]:
        _collect()
    return x


def at_boundary():
    """Collect now if a collection is due (called where little is alive)."""
    if _state["bytes"] > _state["threshold"] or _rss_grown():
        _collect()


def _collect():
    if _state["collect"] is None:
        return
    _state["bytes"] = 0
    _state["collections"] += 1
    _state["collect"]()
    _state["rss_base"] = _rss()


def count_args(args):
    """Count the arguments of an R callback as handed to R."""
    total = 0
    for a in args:
        total += _nbytes(a)
    _state["bytes"] += total


if _BACKEND == "torch":
    import torch

    def _leaf_nbytes(x):
        if isinstance(x, torch.Tensor):
            return x.nelement() * x.element_size()
        return 0

elif _BACKEND == "jax":
    import jax

    def _leaf_nbytes(x):
        # Tracers hold no memory. size * itemsize: ``x.nbytes`` is ~10x
        # slower, a cost on every op called from R.
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
            return x.size * x.dtype.itemsize
        return 0

else:
    from tensorflow.python.framework.ops import EagerTensor

    def _leaf_nbytes(x):
        # Eager tensors only (a check against tf.Tensor is ~10x slower).
        if isinstance(x, EagerTensor):
            n = x.shape.num_elements()
            return (n or 0) * x.dtype.size
        return 0


def _nbytes(x):
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    return _leaf_nbytes(x)
