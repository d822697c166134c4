"""R's ``f`` and ``grad`` as a host op inside a compiled computation.

A custom-gradient function whose trace failed (``f`` reads tensor values in
R: ``besselK(as.array(x), 1.5)``) runs R at every call.  Eagerly R gets the
backend's tensors (``_trace.RCalls``).  Inside a computation the backend
compiles (``tf.function``, ``jax.jit``, Keras' training step) the inputs
are abstract, so :class:`HostCalls` stages the backend's own host callback
instead (``host_call`` of the adapter: ``tf.numpy_function``,
``jax.pure_callback``), under the adapter's custom gradient as before: the
forward callback runs R's ``f`` on concrete values and keeps ``grad`` under
a handle, which is one more output of the op; the backward callback takes
that handle and runs ``grad``.  The value's shapes and dtypes must be known
before R runs: R's ``value_like`` callback gives them, from symbolic
inputs.

R runs only on the main thread.  A callback the backend runs on a thread of
its own (TensorFlow's executor) hands its work to the main thread when the
main thread serves (``_serving.serve``, around the calls customgrad makes), and
is an error of class ``customgrad_error_thread`` otherwise: never a wait
that can't end.

A failure inside a callback (an R error, a value of the wrong shape) can't
cross the backend's runtime as an exception: the backend raises its own
error, whose text holds the callback's.  So the failure is kept here under
a number written into that text, and :func:`recover` finds it again.
"""

import itertools
import logging
from collections import OrderedDict

import keras
import numpy as np

from customgrad import _backend, _bridge, _serving
from customgrad._structure import flatten
from customgrad.errors import (
    HostFailure,
    HostValueError,
    has_r_class,
    mark_host_failure,
    reason_of,
)

# Grad callbacks kept by one staged op between its forward callback and its
# backward one (_Node); a forward whose backward never runs (jax.vjp's
# pullback dropped) leaves one, so only the newest are kept, and a backward
# whose grad was dropped is an error, never a gradient of other values.
MAX_PENDING = 256
_handles = itertools.count(1)


def is_abstract(flat):
    """Whether the backend can't give R these tensors' values here."""
    adapter = _backend.adapter()
    return any(adapter.is_abstract(adapter.dense(x)) for x in flat)


class HostCalls:
    """R's ``f`` and ``grad`` as host callbacks, with the forward protocol
    of ``_trace.RCalls``: ``forward(flat, in_spec)`` gives the value leaves,
    the value spec, the saved tensors and ``backward(upstream, saved)``."""

    def __init__(self, r_forward, value_like):
        self.r_forward = r_forward
        self.value_like = value_like

    def forward_abstract(self, r_calls, flat, in_spec):
        """The forward on abstract inputs: in host callbacks where
        ``value_like`` gives the value's shapes; without it R runs on the
        abstract tensors (``r_calls``), which fails where ``f`` reads their
        values: then ``value_like`` is what is missing."""
        if self.value_like is not None:
            return self.forward(flat, in_spec)
        try:
            return r_calls.forward(flat, in_spec)
        except Exception as exc:
            if not _backend_failed(exc):
                raise  # the user's own error, or customgrad's
            raise HostValueError(problem="missing", reason=reason_of(exc)) from exc

    def forward(self, flat, in_spec):
        adapter = _backend.adapter()
        # Keras infers shapes on sparse placeholders where it takes an
        # operand for sparse (`x * 2`): a host callback takes dense arrays.
        flat = [adapter.dense(x) for x in flat]
        specs, spec = self._value_specs(flat, in_spec)
        node = _Node()
        in_specs = [(_bridge.static_shape(x), _bridge.dtype_of(x)) for x in flat]
        node.staging = True
        try:
            outputs = adapter.host_call(
                lambda *arrays: _on_main(
                    node.run_forward, self, in_spec, specs, spec, arrays
                ),
                flat,
                specs + [((), "int32")],
            )
        finally:
            node.staging = False
        leaves, handle = list(outputs[:-1]), outputs[-1]

        def backward(upstream, saved):
            # Staged only where a backward pass is built: its forward keeps
            # grad from then on (a forward alone keeps nothing).
            node.keeps = True
            handle, inputs = saved[0], saved[1:]
            upstream = _bridge.fill_upstream(upstream, leaves)
            return list(
                adapter.host_call(
                    lambda *arrays: _on_main(
                        node.run_backward, in_spec, spec, in_specs, len(inputs), arrays
                    ),
                    [handle, *inputs, *upstream],
                    in_specs,
                )
            )

        return leaves, spec, [handle, *flat], backward

    def _value_specs(self, flat, in_spec):
        """``([(shape, dtype)] per value leaf, value spec)``, from R's
        ``value_like`` callback called on symbolic copies of the inputs."""
        symbolic = [
            keras.KerasTensor(_bridge.static_shape(x), _bridge.dtype_of(x)) for x in flat
        ]
        like = _bridge.call_r(self.value_like, *_bridge.pack(in_spec, symbolic))
        leaves, spec = flatten(like)
        specs = []
        for i, (leaf, x) in enumerate(zip(leaves, _exact(leaves, symbolic, flat))):
            if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
                raise HostValueError(problem="not_tensor", leaf=i + 1)
            specs.append((x, _bridge.dtype_of(leaf)))
        return specs, spec


def _backend_failed(exc):
    """Whether R's ``f`` or ``grad`` failed in a call of the backend's (R
    raised ``customgrad_error_f`` / ``_grad``, as for ``as.array()`` of a
    tracer), rather than with an error of its own."""
    return has_r_class(exc, "customgrad_error_f", "customgrad_error_grad")


def _exact(leaves, symbolic, flat):
    """Each leaf's shape, with the input's own shape where the leaf is an
    input (``value_like = "x"``: a JAX tracer's dimensions may be symbolic)."""
    for leaf in leaves:
        for s, x in zip(symbolic, flat):
            if leaf is s:
                yield tuple(x.shape)
                break
        else:
            yield _bridge.static_shape(leaf)


class _Node:
    """One staged host op. Its forward callback keeps R's ``grad`` for the
    backward callback (``pending``, by handle) once a backward pass was
    built for it (``keeps``), or where it runs while it is being staged
    (``staging``: JAX runs an eager transform's callbacks at once, before
    the backward is traced). What it keeps goes with it: the backend holds
    the node as long as the computation that may run the backward."""

    __slots__ = ("keeps", "staging", "pending")

    def __init__(self):
        self.keeps = False
        self.staging = False
        self.pending = OrderedDict()

    def run_forward(self, host, in_spec, specs, spec, arrays):
        adapter = _backend.adapter()
        inputs = _bridge.pack(in_spec, [adapter.from_host(a) for a in arrays])
        leaves, value_spec, grad = _bridge.call_forward(host.r_forward, inputs, host=True)
        if not value_spec.same_as(spec) or len(leaves) != len(specs):
            raise HostValueError(problem="nesting", expected=len(specs), returned=len(leaves))
        out = [_host_value(v, s, i) for i, (v, s) in enumerate(zip(leaves, specs), 1)]
        handle = 0
        if self.keeps or self.staging:
            handle = next(_handles) % 2**31
            self.pending[handle] = grad
            while len(self.pending) > MAX_PENDING:
                self.pending.popitem(last=False)
        return [*out, np.int32(handle)]

    def run_backward(self, in_spec, spec, in_specs, n_inputs, arrays):
        return _run_backward(self.pending.pop(int(arrays[0]), None), in_spec,
                             spec, in_specs, n_inputs, arrays)  # fmt: skip


def _run_backward(grad, in_spec, spec, in_specs, n_inputs, arrays):
    adapter = _backend.adapter()
    if grad is None:
        raise HostValueError(problem="lost", kept=MAX_PENDING)
    inputs = _bridge.pack(in_spec, [adapter.from_host(a) for a in arrays[1 : 1 + n_inputs]])
    upstream = _bridge.pack(spec, [adapter.from_host(a) for a in arrays[1 + n_inputs :]])
    grads = _bridge.call_grad(grad, upstream, inputs, fill_none=True)
    return [
        np.asarray(keras.ops.convert_to_numpy(g)).astype(dtype, copy=False)
        for g, (_, dtype) in zip(grads, in_specs)
    ]


def _host_value(value, spec, i):
    """R's value leaf ``value`` as a NumPy array of the declared
    ``spec``; a floating value of another floating dtype is cast."""
    shape, dtype = spec
    array = np.asarray(keras.ops.convert_to_numpy(value))
    got = _bridge.static_shape(array)
    if not _bridge.shapes_match(got, shape):
        raise HostValueError(
            problem="shape",
            leaf=i,
            shape=_bridge.format_shape(got),
            declared=_bridge.format_shape(shape),
        )
    if array.dtype.kind != np.dtype(dtype).kind and not (
        array.dtype.kind == "f" and np.dtype(dtype).kind == "f"
    ):
        raise HostValueError(problem="dtype", leaf=i, dtype=str(array.dtype), declared=dtype)
    return array.astype(dtype, copy=False)


def _on_main(fn, *args):
    """``fn(*args)`` on the main thread (``_serving.on_main``); a failure is
    kept (``errors.mark_host_failure``) and raised marked."""
    try:
        return _serving.on_main(fn, *args)
    except BaseException as exc:
        raise mark_host_failure(exc) from None


class _QuietFailures(logging.Filter):
    """JAX logs the traceback of every failed callback before its runtime
    raises its own error; a host callback's failure reaches the caller
    (``errors.recover_host_failure``), so its log record is dropped, and
    only it."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, HostFailure)


def quiet(logger_name):
    """Drop the log records of host failures from ``logger_name``."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _QuietFailures) for f in logger.filters):
        logger.addFilter(_QuietFailures())
