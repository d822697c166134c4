"""What every backend adapter shares: entering R, and checking what R gave.

R is entered only through :func:`call_r`, which refuses non-main threads
(reticulate aborts the R process there) and raises the R side's errors.
"""

import contextlib
import threading

import keras

from customgrad import _deferred, _memory
from customgrad._structure import flatten, unflatten
from customgrad.errors import (
    GradientCountError,
    GradientShapeError,
    GradientStructureError,
    RError,
    ThreadError,
)

_MAIN_THREAD = threading.main_thread()
r_calls = [0]  # calls into R so far (the benchmark counts them per step)


def call_r(fn, *args, count=True, **kwargs):
    """Call the R callback ``fn``; re-raise an R error it reports."""
    if threading.current_thread() is not _MAIN_THREAD:
        raise ThreadError(
            "A customgrad function was called on a non-main Python thread "
            f"({threading.current_thread().name!r}); R can only run on the "
            "main thread. Run this code eagerly or in a compiled function "
            "traced on the main thread (not inside tf.py_function, a tf.data "
            "map or a CUDA backward)."
        )
    if count:
        _memory.count_args(args)
    r_calls[0] += 1
    result = fn(*args, **kwargs)
    if isinstance(result, RError):
        raise result
    return result


def to_tensor(x):
    """A backend tensor for ``x``; numbers become Keras' float type."""
    if isinstance(x, keras.Variable):
        # Its backend value (a tf.Variable, a torch Parameter, a JAX array),
        # so that gradients reach the variable.
        return x.value
    if keras.ops.is_tensor(x):
        return x
    return keras.ops.convert_to_tensor(x, dtype=keras.config.floatx())


def flat_inputs(args):
    """Flatten call arguments into tensors and the spec to rebuild them."""
    leaves, spec = flatten(list(args))
    return [to_tensor(x) for x in leaves], spec


class Grad:
    """The R ``grad`` of one forward call (a handle, or a Python stand-in),
    with the values of the ops that ``f`` recorded: ``grad`` may use them."""

    __slots__ = ("handle", "values", "recorded")

    def __init__(self, handle, values, recorded=None):
        self.handle = handle
        self.values = values
        # [grads, tape, upstream id] when R recorded grad during forward.
        self.recorded = recorded

    def __del__(self):
        # R drops the callback at its next forward call (R can't be
        # entered from here: this may run anywhere).
        if self.handle is not None and not callable(self.handle):
            _released.append(self.handle)


_grad_runner = {"run": None}
_released = []


def set_grad_runner(run):
    """Register R's ``run_grad(handle, upstream, variables)`` callback."""
    _grad_runner["run"] = run


def _released_kwargs():
    """``released=`` handles for R's forward, when there are any."""
    if not _released:
        return {}
    handles = _released[:]
    del _released[: len(handles)]
    return {"released": handles}


def _seed(ids, tensors):
    """The tensors R got from Python, by the ids R gave them."""
    if not isinstance(ids, list):
        ids = [ids]
    return {node_id: x for node_id, x in zip(ids, tensors) if node_id}


_shape_only = [0]


@contextlib.contextmanager
def no_backward():
    """Calls inside only work out output shapes: no backward pass follows."""
    _shape_only[0] += 1
    try:
        yield
    finally:
        _shape_only[0] -= 1


def call_forward(forward, inputs, record=True):
    """Run the R forward; return ``(flat value tensors, value spec, grad)``.

    R returns ``[value, grad, tape, input_ids, recorded]``: the ops ``f``
    recorded run here, and ``recorded`` is ``grad`` recorded ahead (then
    ``grad``, the handle of an R callback, is None), or None.
    ``record=False`` tells R that no backward pass will follow.
    (Python stand-ins for R return ``[value, grad]``.)
    """
    kwargs = _released_kwargs()
    if not record or _shape_only[0]:
        kwargs["record"] = False
    # Not counted as handed to R: the inputs came from R's caller.
    value, grad, *rest = call_r(forward, *inputs, count=False, **kwargs)
    values, recorded, seeded = {}, None, {}
    if rest:
        tape, ids, recorded = rest
        seeded = _seed(ids, inputs)
        values = _deferred.run(tape, dict(seeded))
    leaves, spec = flatten(_deferred.decode(value, values))
    if recorded is not None:
        # No R grad waits (handle None): keep what the recorded grad needs
        # and free the other temporaries of f now.
        keep = _deferred.needed(recorded)
        values = {k: v for k, v in values.items() if k in keep}
    # f's values live as long as the backward pass can run, which R's
    # reference to the result decides.
    _memory.count_args(v for k, v in values.items() if k not in seeded)
    return [to_tensor(x) for x in leaves], spec, Grad(grad, values, recorded)


def fill_upstream(upstream, outputs):
    """Zeros where the backend passed no upstream for an output."""
    return [
        keras.ops.zeros_like(out) if up is None else up
        for up, out in zip(upstream, outputs)
    ]


def call_grad(grad, upstream, inputs, fill_none, variables=None):
    """Run the R grad and return one flat gradient per flat input tensor.

    ``inputs`` is the nest of input tensors as ``forward`` saw them;
    ``fill_none`` turns a missing gradient into zeros (JAX needs them).
    With ``variables`` the R grad returns ``[input_grads, variable_grads]``.
    """
    if grad.recorded is not None and variables is None:
        # grad ran during forward: its tape runs here, with no call into R.
        # (With variables, R's runner raises: a recorded grad has no
        # `variables` argument.)
        result, tape, upstream_id = grad.recorded
        values = _deferred.run(tape, {upstream_id: upstream}, grad.values)
    elif callable(grad.handle):
        result = call_r(grad.handle, upstream, variables)
        values = {}
    else:
        result, tape, ids = call_r(_grad_runner["run"], grad.handle, upstream, variables)
        values = _deferred.run(tape, _seed(ids, [upstream]), grad.values)
    result = _deferred.decode(result, values, grad.values)
    if variables is not None:
        result, variable_grads = result
        return normalize_gradients(result, inputs, fill_none), variable_grads
    return normalize_gradients(result, inputs, fill_none)


def normalize_gradients(grads, inputs, fill_none):
    """Check ``grads`` against ``inputs`` and return flat gradient tensors."""
    n = len(inputs)
    if not isinstance(grads, (list, tuple)):
        grads = [grads]
    elif n == 1 and len(grads) != 1 and isinstance(inputs[0], (list, dict)):
        # One nested input: its gradient may be given without the outer list.
        grads = [grads]
    if len(grads) != n:
        raise GradientCountError(
            f"`grad` must return {n} gradient{'s' if n != 1 else ''}, one per "
            f"input of `f`, but it returned {len(grads)}."
        )
    flat = []
    for i, (g, x) in enumerate(zip(grads, inputs), start=1):
        g_leaves, g_spec = flatten(g)
        x_leaves, x_spec = flatten(x)
        if g_spec.is_leaf and g_leaves[0] is None:
            g_leaves, g_spec = [None] * len(x_leaves), x_spec
        if not g_spec.same_as(x_spec):
            raise GradientStructureError(
                f"The gradient for input {i} must have the same nesting as "
                f"input {i} ({len(x_leaves)} tensor(s)), but it does not."
            )
        for j, (gl, xl) in enumerate(zip(g_leaves, x_leaves), start=1):
            where = f"input {i}" if x_spec.is_leaf else f"input {i}, tensor {j}"
            flat.append(_check_leaf(gl, xl, where, fill_none))
    return flat


def _check_leaf(g, x, where, fill_none):
    if g is None:
        return keras.ops.zeros_like(x) if fill_none else None
    g = to_tensor(g)
    g_shape, x_shape = static_shape(g), static_shape(x)
    if not shapes_match(g_shape, x_shape):
        raise GradientShapeError(
            f"The gradient for {where} has shape {format_shape(g_shape)}, but "
            f"{where} has shape {format_shape(x_shape)}; they must be equal."
        )
    if g.dtype != x.dtype:
        g = keras.ops.cast(g, keras.backend.standardize_dtype(x.dtype))
    return g


def static_shape(x):
    """``x``'s shape as a tuple (None for unknown dims), or None if unknown."""
    shape = x.shape
    if hasattr(shape, "as_list"):
        try:
            return tuple(shape.as_list())
        except ValueError:  # unknown rank
            return None
    return tuple(int(d) if d is not None else None for d in shape)


def shapes_match(a, b):
    """Whether two static shapes can be equal (unknown parts match anything)."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(p is None or q is None or p == q for p, q in zip(a, b))


def format_shape(shape):
    """A shape for an error message: ``(2, 3)``, ``(?, 3)`` or ``(unknown)``."""
    if shape is None:
        return "(unknown)"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def call_on_stack(calls, inner, tensors, in_spec):
    """Run a backend's decorated ``inner`` with this call's state on top of
    ``calls`` (the decorator runs ``inner`` at once, which reads it there);
    return ``(state, result)``."""
    state = {"in_spec": in_spec}
    calls.append(state)
    try:
        result = inner(*tensors)
    finally:
        calls.pop()
    return state, result


def pack(spec, leaves):
    """Put flat leaves back into ``spec``'s nest."""
    return unflatten(spec, leaves)
