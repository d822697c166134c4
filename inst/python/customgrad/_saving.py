"""Traces as plain data, saved with a model and replayed without R.

A trace (``_trace.Trace``) is two programs of Keras operations over
numbered slots (``_program``).  :func:`save_trace` writes one as JSON-ready
data: each step's operation by its Keras config (the class and the
arguments it was made with), its arguments with slots marked, constants as
arrays.  :func:`load_trace` makes the trace again, in any process with
Keras and this module, R or not.  A trace that holds something that can't
be written so (a Keras variable the function captured, a layer, a Python
object) is not saved; the function is then needed to load the model.

Each saved trace carries the number of its format (:data:`FORMAT`).
:func:`format_problem` tells whether this customgrad reads a trace: it
reads every format from :data:`OLDEST_FORMAT` to :data:`FORMAT`; a trace
without a number was saved by customgrad 0.1.0, in format 1.
"""

import operator

import keras
import numpy as np

from customgrad import _keras_internals, _program, _trace
from customgrad._structure import LEAF, Spec, Static

_NATIVE_NAMES = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                 operator.truediv: "truediv"}  # fmt: skip
_NATIVE_FNS = {name: fn for fn, name in _NATIVE_NAMES.items()}


# The format saved traces are written in.  It changes when traces are
# written so that an older customgrad can't read them (a new kind of step,
# a field renamed or given a new meaning); a field that an older customgrad
# can ignore leaves it as it is.  Formats from OLDEST_FORMAT to FORMAT are
# read; raising OLDEST_FORMAT drops the reading of older ones.
FORMAT = 1
OLDEST_FORMAT = 1
# The format of traces saved with no number (customgrad 0.1.0).
_UNNUMBERED_FORMAT = 1


class NotPortable(Exception):
    """The trace holds something that can't be saved as data."""


def save_traces(core):
    """The saveable traces of a custom-gradient function's ``core`` (general
    ones, which serve every batch size, first), as a list of dicts."""
    traces = getattr(core, "cache", None)
    if traces is None:
        return []
    entries = [e for e in traces.values() if isinstance(e, _trace.Trace)]
    entries.sort(key=lambda e: not e.is_general)
    saved = []
    for entry in entries:
        try:
            saved.append(save_trace(entry))
        except NotPortable:
            continue
    return saved


def save_trace(entry):
    """One trace as data; :class:`NotPortable` if it can't be."""
    c = entry.compiled
    return {
        "format": FORMAT,
        "nesting": _save_spec(entry.nesting),
        "inputs": [_save_tensor_spec(s) for s in entry.input_specs],
        "value": _save_spec(entry.spec),
        "value_specs": [_save_tensor_spec(s) for s in entry.value_specs],
        "forward": [_save_step(step) for step in c.forward.steps],
        "backward": [_save_step(step) for step in c.backward.steps],
        "n_slots": c.n_slots,
        "n_inputs": c.n_inputs,
        "upstream_start": c.upstream_start,
        "n_upstream": c.n_upstream,
        "value_leaves": [_save_leaf(x) for x in c.value],
        "grad_leaves": [_save_leaf(x) for x in c.grads],
        "saved": list(c.saved),
    }


def trace_format(data):
    """The format number of saved trace ``data`` (None if it is not a
    saved trace at all)."""
    if not isinstance(data, dict):
        return None
    return data.get("format", _UNNUMBERED_FORMAT)


def format_problem(data):
    """Why this customgrad can't read saved trace ``data``: "newer" (a
    format a newer customgrad wrote), "older" (one older than
    :data:`OLDEST_FORMAT`) or "unknown" (not a format number); None if it
    reads it."""
    number = trace_format(data)
    if not isinstance(number, int) or isinstance(number, bool):
        return "unknown"
    if number > FORMAT:
        return "newer"
    if number < OLDEST_FORMAT:
        return "older"
    return None


def load_trace(data, fill_none):
    """A trace from :func:`save_trace`'s data, for a backend that needs
    zeros (``fill_none``) or accepts None for a missing gradient."""
    c = _program.Compiled()
    c.n_slots = data["n_slots"]
    c.n_inputs = data["n_inputs"]
    c.upstream_start = data["upstream_start"]
    c.n_upstream = data["n_upstream"]
    c.value = [_load_leaf(x) for x in data["value_leaves"]]
    c.grads = [_load_leaf(x) for x in data["grad_leaves"]]
    saved = set(data["saved"])
    if fill_none:
        # Saved where a missing gradient could stay None: zeros here.
        for i, g in enumerate(c.grads):
            if isinstance(g, tuple) and g[1] is None:
                c.grads[i] = ("zeros", i)
                saved.add(i)
    c.saved = sorted(saved)
    _program.set_programs(
        c,
        [_load_step(s) for s in data["forward"]],
        [_load_step(s) for s in data["backward"]],
    )
    return _trace.Trace.from_parts(
        compiled=c,
        nesting=_load_spec(data["nesting"]),
        spec=_load_spec(data["value"]),
        input_specs=[_load_tensor_spec(s) for s in data["inputs"]],
        value_specs=[_load_tensor_spec(s) for s in data["value_specs"]],
        fill_none=fill_none,
    )


def _save_tensor_spec(spec):
    shape, dtype = spec
    return {"shape": list(shape), "dtype": dtype}


def _load_tensor_spec(data):
    return tuple(data["shape"]), data["dtype"]


def _save_spec(spec):
    if spec.is_leaf:
        return "leaf"
    if spec.kind is Static:
        raise NotPortable("an argument kept in R")
    if spec.kind is dict:
        return {"dict": {k: _save_spec(c) for k, c in spec.children.items()}}
    return {spec.kind.__name__: [_save_spec(c) for c in spec.children]}


def _load_spec(data):
    if data == "leaf":
        return LEAF
    (kind, children), = data.items()
    if kind == "dict":
        return Spec(dict, {k: _load_spec(c) for k, c in children.items()})
    return Spec({"list": list, "tuple": tuple}[kind], [_load_spec(c) for c in children])


def _save_leaf(leaf):
    if isinstance(leaf, int):
        return leaf
    constant = leaf[1]
    if constant is None:
        return None
    return _save_value(constant.array)


def _load_leaf(data):
    if isinstance(data, int):
        return data
    if data is None:
        return ("const", None)
    return ("const", _trace.Constant(_load_value(data)))


def _save_step(step):
    fn = step.fn
    if fn in _NATIVE_NAMES:
        op = {"native": _NATIVE_NAMES[fn]}
    else:
        operation = _keras_internals.operation_of(fn)
        if operation is None:
            raise NotPortable("a step that is not a Keras operation")
        op = {"operation": _save_operation(operation)}
    args = list(step.args)
    for position, slot in step.slot_args:
        args[position] = _program.Slot(slot)
    return {
        **op,
        "args": [_save_value(a) for a in args],
        "kwargs": {k: _save_value(v) for k, v in step.kwargs.items()},
        "outputs": list(step.outputs),
    }


def _save_operation(operation):
    config = keras.saving.serialize_keras_object(operation)
    try:
        keras.saving.deserialize_keras_object(config)
    except Exception as exc:  # noqa: BLE001 - any failure means "can't"
        raise NotPortable(str(exc)) from exc
    return config


def _load_step(data):
    if "native" in data:
        fn = _NATIVE_FNS[data["native"]]
    else:
        operation = keras.saving.deserialize_keras_object(data["operation"])
        fn = _keras_internals.eager_call(operation)
    args = [_load_value(a) for a in data["args"]]
    kwargs = {k: _load_value(v) for k, v in data["kwargs"].items()}
    slot_args = []
    def holds_slot(a):
        return _program.holds(a, _program.Slot)

    nested = any(holds_slot(v) for v in kwargs.values()) or any(
        holds_slot(a) and not isinstance(a, _program.Slot) for a in args
    )
    if nested:
        args = [_program.Nested(a) if holds_slot(a) else a for a in args]
        kwargs = {k: _program.Nested(v) if holds_slot(v) else v for k, v in kwargs.items()}
    else:
        for i, a in enumerate(args):
            if isinstance(a, _program.Slot):
                slot_args.append((i, a.index))
                args[i] = None
    return _program.Step(fn, tuple(args), kwargs, slot_args, nested, data["outputs"])


def _save_value(x):
    """An argument as JSON-ready data (slots, tuples and arrays marked)."""
    if isinstance(x, _program.Slot):
        return {"slot": x.index}
    if isinstance(x, _program.Nested):
        return _save_value(x.template)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, tuple):
        return {"tuple": [_save_value(a) for a in x]}
    if isinstance(x, list):
        return [_save_value(a) for a in x]
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise NotPortable("a dict with keys that are not strings")
        return {"dict": {k: _save_value(v) for k, v in x.items()}}
    if isinstance(x, keras.Variable):
        raise NotPortable("a Keras variable the function captured")
    if isinstance(x, (np.ndarray, np.generic)) or keras.ops.is_tensor(x):
        array = np.asarray(keras.ops.convert_to_numpy(x))
        dtype = keras.backend.standardize_dtype(array.dtype)
        return {"array": array.astype(np.float64 if dtype == "bfloat16" else array.dtype).tolist(),
                "dtype": dtype, "shape": list(array.shape)}  # fmt: skip
    raise NotPortable(f"an argument of type {type(x).__name__}")


def _load_value(data):
    if isinstance(data, list):
        return [_load_value(a) for a in data]
    if not isinstance(data, dict):
        return data
    if "slot" in data:
        return _program.Slot(data["slot"])
    if "tuple" in data:
        return tuple(_load_value(a) for a in data["tuple"])
    if "dict" in data:
        return {k: _load_value(v) for k, v in data["dict"].items()}
    if "array" in data:
        array = np.asarray(data["array"], dtype=_trace.numpy_dtype(data["dtype"]))
        return array.reshape(data["shape"])
    raise ValueError(f"Unknown saved value: {data!r}")
