"""What every backend adapter shares: entering R, and checking what R gave.

R is entered only through :func:`call_r`, which refuses non-main threads
(reticulate aborts the R process there) and holds R's interrupts while R
runs (see :mod:`customgrad._interrupts`).
"""

import sys
import threading

import keras
import numpy as np

from customgrad import _interrupts, _memory, _messages
from customgrad._structure import Static, flatten, is_missing, unflatten
from customgrad.errors import (
    ForeignTensorError,
    carried_r_condition,
    carries_r_condition,
    take_noted_r_classes,
    take_noted_stop,
    GradientCountError,
    GradientDtypeError,
    GradientShapeError,
    GradientStructureError,
    ThreadError,
)

_MAIN_THREAD = threading.main_thread()
r_calls = [0]  # calls into R so far (the benchmark counts them per step)


def call_r(fn, *args, count=True, **kwargs):
    """Call the R callback ``fn`` (an R error comes out as an exception that
    carries the R condition)."""
    if threading.current_thread() is not _MAIN_THREAD:
        raise ThreadError(thread=threading.current_thread().name)
    _raise_stop_in_flight()
    if count:
        _memory.count_args(args)
    r_calls[0] += 1
    try:
        with _interrupts.held():
            return fn(*args, **kwargs)
    except KeyboardInterrupt as exc:
        exc.customgrad_stop = True
        raise
    except Exception as exc:
        if take_noted_stop():
            exc.customgrad_stop = True
            raise
        classes = take_noted_r_classes()
        if classes and carries_r_condition(exc):
            # Keeps the R condition's own classes through code that is not
            # customgrad's, up to R (see errors.RConditionError).
            raise carried_r_condition(exc, classes) from exc
        raise


def _raise_stop_in_flight():
    """An interrupt or a time limit that left R is being handled by code
    that calls R again (Keras' PyTorch backend retries a failed symbolic
    call on concrete tensors, catching everything): it goes on to the user
    instead, as R itself would not signal it again."""
    exc = sys.exc_info()[1]
    seen = set()
    while exc is not None and id(exc) not in seen:
        if getattr(exc, "customgrad_stop", False):
            raise exc
        seen.add(id(exc))
        exc = exc.__context__


def to_tensor(x):
    """A backend tensor for ``x``; numbers become Keras' float type."""
    if isinstance(x, keras.Variable):
        # Its backend value (a tf.Variable, a torch Parameter, a JAX array),
        # so that gradients reach the variable.
        return x.value
    if keras.ops.is_tensor(x):
        return x
    framework = type(x).__module__.partition(".")[0]
    if framework in _FRAMEWORKS and _FRAMEWORKS[framework] != keras.config.backend():
        # Another backend's tensor: converting it would copy it through
        # NumPy, or fail deep inside the backend.
        raise ForeignTensorError(
            tensor=f"{type(x).__module__}.{type(x).__name__}",
            framework=_FRAMEWORKS[framework],
            backend=keras.config.backend(),
        )
    return keras.ops.convert_to_tensor(x, dtype=keras.config.floatx())


# The Python package of each backend's tensors.
_FRAMEWORKS = {
    "tensorflow": "tensorflow",
    "jax": "jax",
    "jaxlib": "jax",
    "torch": "torch",
}


def flat_inputs(args):
    """Flatten call arguments into tensors and the spec to rebuild them."""
    if all(_is_plain_tensor(x) for x in args):
        # The usual call: nothing nested, nothing to convert.
        spec = _plain_specs.get(len(args))
        if spec is None:
            spec = _plain_specs[len(args)] = flatten(list(args))[1]
        return list(args), spec
    leaves, spec = flatten(list(args))
    return [to_tensor(x) for x in leaves], spec


# The spec of n tensors passed as they are, by n.
_plain_specs = {}


def _is_plain_tensor(x):
    # A Keras variable is a tensor to TensorFlow, but to_tensor() takes
    # its value.
    return keras.ops.is_tensor(x) and not isinstance(x, keras.Variable)


class Grad:
    """The R ``grad`` of one forward call: the handle of an R callback (see
    :func:`set_grad_runner`), or a Python stand-in for R in tests."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        # R drops the callback at its next forward call (R can't be
        # entered from here: this may run anywhere).
        if self.handle is not None and not callable(self.handle):
            _released.append(self.handle)


def f_result_parts(result):
    """The items of ``result``, keras3's ``tuple(value, grad)`` that R's
    ``f`` returned, as a list, ``grad`` the R function reticulate wrapped
    rather than its Python wrapper: R would make an R function of that
    wrapper, reading its formals (about 0.2 ms a call), only to take the R
    function back out of it. reticulate's wrapper (rpytools.call's
    ``python_function``) holds the R function in its closure's one cell
    (R/reticulate-internals.R)."""
    items = list(result)
    if len(items) == 2:
        grad = items[1]
        cells = getattr(grad, "__closure__", None)
        if getattr(grad, "__module__", None) == "rpytools.call" and cells:
            items[1] = cells[0].cell_contents
    return items


_grad_runner = {"run": None, "release": None}
_released = []


def set_grad_runner(run, release=None):
    """Register R's ``run_grad(handle, upstream, variables)`` callback and
    ``release_grads(handles)``, which drops the callbacks Python no longer
    needs."""
    _grad_runner["run"] = run
    _grad_runner["release"] = release


def release_to_r():
    """Hand R the grad callbacks Python dropped, now: at the end of a call
    R made (``op_grad()``, ``op_compile()``), whose backward passes are
    over, so that what an R-run ``grad`` holds does not outlive the call.
    Nothing to do (no call into R) where no R forward ran."""
    if _released and _grad_runner["release"] is not None:
        _grad_runner["release"](take_released())


def take_released():
    """The handles of R grad callbacks that Python no longer needs."""
    handles = _released[:]
    del _released[: len(handles)]
    return handles


def _released_kwargs():
    """``released=`` handles for R's forward, when there are any."""
    if not _released:
        return {}
    return {"released": take_released()}


def call_forward(forward, inputs, **options):
    """Run the R forward; return ``(flat value tensors, value spec, grad)``.

    R replies a :class:`_messages.ForwardReply`; ``options`` go to R's
    forward as they are (``host=True``: R runs in a host callback).
    """
    # Not counted as handed to R: the inputs came from R's caller.
    try:
        reply = call_r(forward, *inputs, count=False, **options, **_released_kwargs())
    except Exception as exc:
        _mark_failure(exc, "f")
        raise
    value, grad = _messages.read_forward_reply(reply)
    leaves, spec = flatten(value)
    return [to_tensor(x) for x in leaves], spec, Grad(grad)


def _mark_failure(exc, what):
    """Marks an error leaving R's ``f`` or ``grad`` with which (the
    innermost call's, where they nest), for a model's step to class it
    (``_model_steps``)."""
    if not hasattr(exc, "customgrad_in"):
        exc.customgrad_in = what


def fill_upstream(upstream, outputs):
    """Zeros where the backend passed no upstream for an output."""
    return [
        keras.ops.zeros_like(out) if up is None else up
        for up, out in zip(upstream, outputs)
    ]


def call_grad(grad, upstream, inputs, fill_none, variables=None, convert=None):
    """Run the R grad and return one flat gradient per flat input tensor.

    ``inputs`` is the nest of input tensors as ``forward`` saw them;
    ``fill_none`` turns a missing gradient into zeros (JAX needs them).
    With ``variables`` the R grad returns ``[input_grads, variable_grads]``.
    ``convert`` turns a gradient leaf into a tensor (default
    :func:`to_tensor`; symbolic while tracing).
    """
    try:
        if callable(grad.handle):
            result = call_r(grad.handle, upstream, variables)
        else:
            result = call_r(_grad_runner["run"], grad.handle, upstream, variables)
    except Exception as exc:
        _mark_failure(exc, "grad")
        raise
    _messages.check_trace_failed(result)
    if variables is not None:
        result, variable_grads = result
        return normalize_gradients(result, inputs, fill_none, convert), variable_grads
    return normalize_gradients(result, inputs, fill_none, convert)


def normalize_gradients(grads, inputs, fill_none, convert=None):
    """Check ``grads`` against ``inputs`` and return flat gradient tensors.

    ``grads`` holds one gradient per argument passed (options get None) or
    one per tensor input (options are skipped); an argument the call did not
    pass (a default of ``f``) never counts.
    """
    if not isinstance(grads, (list, tuple)):
        grads = [grads]
    grads = _spread_gradients(list(grads), inputs)
    flat = []
    for i, (g, x) in enumerate(zip(grads, inputs), start=1):
        g_leaves, g_spec = flatten(g)
        x_leaves, x_spec = flatten(x)
        if g_spec.is_leaf and g_leaves[0] is None:
            g_leaves, g_spec = [None] * len(x_leaves), x_spec
        if x_spec.kind is Static and not g_spec.same_as(x_spec):
            raise GradientStructureError(input=i, problem="static")
        if not g_spec.same_as(x_spec):
            raise GradientStructureError(
                input=i, problem="nesting", n_tensors=len(x_leaves)
            )
        for j, (gl, xl) in enumerate(zip(g_leaves, x_leaves), start=1):
            where = (i, None if x_spec.is_leaf else j)
            flat.append(_check_leaf(gl, xl, where, fill_none, convert or to_tensor))
    return flat


def _spread_gradients(grads, inputs):
    """One gradient per element of ``inputs``: ``grads`` given per argument
    passed, or per tensor input, with None for the rest."""
    passed = [i for i, x in enumerate(inputs) if not is_missing(x)]
    tensors = [i for i in passed if flatten(inputs[i])[1].num_leaves() > 0]
    if len(tensors) == 1 and len(grads) != 1 and len(grads) != len(passed):
        if isinstance(inputs[tensors[0]], (list, dict)):
            # One nested input: its gradient may come without the outer list.
            grads = [grads]
    if len(grads) == len(passed):
        positions = passed
    elif len(grads) == len(tensors):
        positions = tensors
    else:
        raise GradientCountError(
            expected=len(passed), tensors=len(tensors), returned=len(grads)
        )
    spread = [None] * len(inputs)
    for i, g in zip(positions, grads):
        spread[i] = g
    return spread


def _check_leaf(g, x, where, fill_none, convert):
    if g is None:
        return keras.ops.zeros_like(x) if fill_none else None
    label = f"input {where[0]}" + (f", tensor {where[1]}" if where[1] else "")
    x_dtype = keras.backend.standardize_dtype(x.dtype)
    kind = _plain_kind(g)
    if kind is not None and kind not in "fiu":
        # Would be cast to a float without a word (R's NA arrives as True,
        # a complex number would lose its imaginary part), or can't be.
        dtype = {"b": "bool", "c": "complex", "U": "string", "S": "string"}.get(kind, "object")
        raise GradientDtypeError(where=label, dtype=dtype, input_dtype=x_dtype)
    g = convert(g)
    g_shape, x_shape = static_shape(g), static_shape(x)
    if not shapes_match(g_shape, x_shape):
        raise GradientShapeError(
            where=label,
            input=where[0],
            tensor=where[1],
            grad_shape=format_shape(g_shape),
            input_shape=format_shape(x_shape),
        )
    return cast_gradient(g, x_dtype, label)


def cast_gradient(g, dtype, label):
    """The gradient tensor ``g`` in ``dtype``, its input's (or variable's):
    a floating gradient of another floating dtype is cast, as PyTorch's
    autograd does, so that every backend and route gives the input's
    dtype; a gradient that is not floating point is a
    :class:`GradientDtypeError` (``label`` says whose)."""
    g_dtype = keras.backend.standardize_dtype(g.dtype)
    if _is_float(dtype) and not _is_float(g_dtype):
        # A logical, integer or complex gradient would be cast without a
        # word (R's NA arrives as True, a complex loses its imaginary part).
        raise GradientDtypeError(where=label, dtype=g_dtype, input_dtype=dtype)
    if g_dtype != dtype:
        # A constant gradient at trace time casts itself (see _trace).
        g = g.cast_to(dtype) if hasattr(g, "cast_to") else keras.ops.cast(g, dtype)
    return g


def _plain_kind(g):
    """NumPy's dtype kind of a gradient that is not a tensor (a Python or
    NumPy value from R), or None for tensors."""
    if isinstance(g, (np.ndarray, np.generic)):
        return g.dtype.kind
    if hasattr(g, "dtype"):
        return None
    try:
        return np.asarray(g).dtype.kind
    except Exception:  # noqa: BLE001 - left to the conversion's own error
        return None


def _is_float(dtype):
    return dtype.startswith(("float", "bfloat"))


def dtype_of(x):
    """``x``'s dtype, as Keras names it."""
    return keras.backend.standardize_dtype(x.dtype)


def static_shape(x):
    """``x``'s shape as a tuple (None for unknown dims), or None if unknown."""
    shape = x.shape
    if hasattr(shape, "as_list"):
        try:
            return tuple(shape.as_list())
        except ValueError:  # unknown rank
            return None
    return tuple(_static_dim(d) for d in shape)


def _static_dim(d):
    """A dimension as an int, or None when unknown (None, or a symbolic
    dimension such as JAX's shape polymorphism uses to build Keras layers)."""
    try:
        return int(d)
    except Exception:  # noqa: BLE001 - a symbolic dimension raises its own
        return None


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

