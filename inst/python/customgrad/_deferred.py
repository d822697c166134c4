"""Run the tensor ops that R recorded inside ``f`` and ``grad``.

Every call from R to Python costs tens of microseconds in reticulate, most
of it spent making the R handle of the result, and a tensor referenced from
R lives until R's garbage collector runs.  So inside a custom-gradient
callback R does not call ``keras.ops`` op by op: it records each op as an
instruction and hands the whole tape back with the callback's result.  The
ops then run here, in the order R wrote them, and their results are plain
Python objects that die when Python drops them.

An instruction is ``[id, op_name, args, kwargs, refs]``: ``refs`` lists the
positions in ``args`` that hold the id of an earlier node instead of a
value.  In a result, ``{".customgrad_node": id}`` stands for a node's value.
"""

import operator

import keras

from customgrad import _memory
from customgrad.errors import DeferredOpError

NODE_KEY = ".customgrad_node"

_ops = {}

# Arithmetic between a floating tensor and a Python number gives the same
# result through the tensor's own operator as through keras.ops, which
# converts the number to a tensor and works out the result type first:
# 3-30x slower for a small tensor (TensorFlow most).
_OPERATORS = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
}
_BACKEND = keras.config.backend()
if _BACKEND == "torch":
    import torch

    def _is_float_tensor(x):
        return isinstance(x, torch.Tensor) and x.is_floating_point()

elif _BACKEND == "jax":
    import jax

    def _is_float_tensor(x):
        return isinstance(x, jax.Array) and x.dtype.kind == "f"

else:
    import tensorflow as tf

    def _is_float_tensor(x):
        return isinstance(x, tf.Tensor) and x.dtype.is_floating


def _is_number(x):
    return type(x) is float or type(x) is int


def _op(name):
    fn = _ops.get(name)
    if fn is None:
        fn = _ops[name] = getattr(keras.ops, name)
    return fn


def _call(name, args, kwargs):
    if not kwargs and len(args) == 2 and name in _OPERATORS:
        a, b = args
        if (_is_number(b) and _is_float_tensor(a)) or (
            _is_number(a) and _is_float_tensor(b)
        ):
            return _OPERATORS[name](a, b)
    return _op(name)(*args, **(kwargs or {}))


def op(name):
    """``keras.ops.<name>``, with the operator shortcut for arithmetic with a
    number (for ops that R calls one at a time)."""
    if name not in _OPERATORS:
        return _op(name)

    def arithmetic(*args, **kwargs):
        return _call(name, args, kwargs)

    arithmetic.__name__ = name
    return arithmetic


def _lookup(node_id, values, parent):
    if node_id in values:
        return values[node_id]
    return parent[node_id]


def run(tape, values, parent=None):
    """Run ``tape`` and store each node's value in ``values`` by id.

    ``parent`` holds the values of the forward pass that ``grad``'s tape may
    refer to (``e`` in ``grad`` when ``f`` computed it).
    """
    for node_id, name, args, kwargs, refs in tape:
        if refs is not None:
            args = list(args)  # a tape may run again (grad, twice)
            for i in refs if isinstance(refs, list) else (refs,):
                args[i] = _lookup(args[i], values, parent)
        try:
            values[node_id] = _call(name, args, kwargs)
        except Exception as exc:
            raise DeferredOpError(
                f"`op_{name}()` failed: {exc}\n"
                "Inside `f` and `grad`, tensor operations run together when "
                "the function returns; set "
                "`options(customgrad.defer_ops = FALSE)` to run each one "
                "where it is written."
            ) from exc
    return values


def decode(x, values, parent=None):
    """``x`` with node markers replaced by the nodes' values."""
    if isinstance(x, dict):
        if len(x) == 1 and NODE_KEY in x:
            return _lookup(x[NODE_KEY], values, parent)
        return {k: decode(v, values, parent) for k, v in x.items()}
    if isinstance(x, list):
        return [decode(v, values, parent) for v in x]
    if isinstance(x, tuple):
        return tuple(decode(v, values, parent) for v in x)
    return x


def needed(recorded):
    """Ids of f's values that a recorded grad ``[grads, tape, upstream id]``
    refers to."""
    grads, tape, upstream_id = recorded
    wanted, made = set(), {upstream_id}
    for node_id, _, args, _, refs in tape:
        if refs is not None:
            for i in refs if isinstance(refs, list) else (refs,):
                wanted.add(args[i])
        made.add(node_id)
    _markers(grads, wanted)
    return wanted - made


def _markers(x, found):
    if isinstance(x, dict):
        if len(x) == 1 and NODE_KEY in x:
            found.add(x[NODE_KEY])
        else:
            for v in x.values():
                _markers(v, found)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _markers(v, found)


def force(tape, node_id):
    """Run ``tape`` now and hand the value of ``node_id`` to R."""
    values = run(tape, {})
    return _memory.handed_to_r(values[node_id])
