"""Keep the memory of tensors that R holds bounded.

A Python object referenced from R is released only when R's garbage
collector finalises the reference, and R does not know how large the tensor
behind it is: temporaries made from R (``1 + e``, ``op_exp(x)``) pile up, and
every new op allocates fresh memory.  So every tensor handed to R is counted
here, and when the bytes handed over since the last collection pass a
threshold, R is asked to collect (a callback into R running a minor
``gc()``, a few ms).

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
}


def set_collector(collect, threshold_bytes):
    """Register R's collector callback and the threshold in bytes."""
    _state["collect"] = collect
    _state["threshold"] = int(threshold_bytes)
    _state["bytes"] = 0


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
    if _state["bytes"] > _state["threshold"]:
        _collect()


def _collect():
    if _state["collect"] is None:
        return
    _state["bytes"] = 0
    _state["collections"] += 1
    _state["collect"]()


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
