"""The Python half of the customgrad R package.

R hands :func:`custom_gradient` an R callback (``forward``) and gets back a
Python callable that is differentiable on the active Keras backend.
``forward(*inputs)`` runs R's ``f`` and replies a record
(``_messages.ForwardReply``): ``value``, a nest of tensors, and ``grad``,
the handle of the R gradient function, which R's ``run_grad`` callback runs
in the backward pass (see ``_bridge``).
By default R's ``f`` and ``grad`` run once per input signature, on Keras
symbolic tensors, and the calls after that replay what they did in Python
(see ``_trace``).  Everything that depends on the backend's conventions
lives here, one adapter per backend behind one interface (``_backend``);
everything that depends on R (formals, conditions, S3) lives in the R
package.
"""

import importlib

from customgrad.errors import (
    CustomGradError,
    GradientCountError,
    GradientShapeError,
    GradientStructureError,
    NotSerializableError,
    ThreadError,
    VariablesError,
    error_classes,
    find_error,
    r_condition_fields,
)

# What the R package calls, by the module that holds it: R uses these
# names only, never a private module's. They are imported at first use
# (see __getattr__): importing customgrad must not import Keras, as
# use_distributed() arranges processes before Keras starts.
R_INTERFACE = {
    "value_and_grad": "_autodiff",
    "compile_function": "_autodiff",
    "enable_float64": "_autodiff",
    "restore_float64": "_autodiff",
    "gradcheck": "_gradcheck",
    "TracedFunction": "_traced_function",
    "Static": "_structure",
    "set_grad_runner": "_bridge",
    "take_released": "_bridge",
    "f_result_parts": "_bridge",
    "set_collector": "_memory",
    "collect_deferred": "_memory",
    "nesting_depth": "_trace",
    "keras_op_of": "errors",
    "arrange": "_distributed",
    "set_r_library": "_interrupts",
}


def __getattr__(name):
    module = R_INTERFACE.get(name)
    if module is None:
        raise AttributeError(f"module 'customgrad' has no attribute {name!r}")
    return getattr(importlib.import_module("customgrad." + module), name)


__all__ = [
    *R_INTERFACE,
    "CustomGradError",
    "GradientCountError",
    "GradientShapeError",
    "GradientStructureError",
    "ThreadError",
    "VariablesError",
    "custom_gradient",
    "error_classes",
    "find_error",
    "grad_gets_variables",
    "held_by_python",
    "make_callable",
    "r_condition_fields",
]


def custom_gradient(
    forward,
    trace=True,
    strict=False,
    notify=None,
    warn_retrace=None,
    max_traces=None,
    backend=None,
    value_like=None,
):
    """Wrap an R ``forward`` callback into a differentiable callable.

    ``forward(*inputs)`` replies ``{"value": ..., "grad": handle}``; in the backward
    pass R's grad runner is called with the handle, the upstream gradient
    and the variables ``f`` read, and returns one gradient per input.
    With ``trace``, R runs once per input signature (``forward`` is then
    called with ``tracing=True`` on symbolic tensors); ``notify(reason)``
    and ``warn_retrace(count)`` are R's callbacks for a trace that failed
    and for too many traces (see ``_trace.Traced``).
    ``value_like(*inputs)`` is R's callback for the shapes and dtypes of
    ``f``'s value from symbolic inputs, which a signature that can't be
    traced needs inside a compiled computation (``_host``).
    ``backend`` defaults to the active Keras backend.  The callable's
    ``core`` attribute is the object that runs ``f`` (its ``traces`` count
    the traces made); its ``from_r`` attribute is the same callable for R's
    calls, which also counts the result as held by R (``_memory``) and
    returns an exception as an ``errors.Raised`` for R to raise.
    """
    from customgrad import _backend, _host, _trace

    adapter = _backend.adapter(backend)
    core = _trace.RCalls(
        forward, adapter.FILL_NONE, getattr(adapter, "forward_history", None)
    )
    core = _trace.Traced(
        core,
        notify=notify,
        warn_retrace=warn_retrace,
        strict=strict,
        max_traces=max_traces or _trace.DEFAULT_MAX_TRACES,
        host=_host.HostCalls(forward, value_like),
    )
    if not trace:
        core.untrace()
    return make_callable(core, adapter)


def make_callable(core, adapter):
    """The differentiable callable over ``core`` (a ``_trace.Traced``, or
    what has its ``forward``) on ``adapter``'s backend; see :func:`custom_gradient`
    for its attributes, and ``output_spec(*args)``, its value's symbolic
    tensors for symbolic ``args``."""
    from customgrad import _memory, _operation, errors
    from customgrad._structure import any_symbolic

    differentiable = adapter.custom_gradient(core)
    operation = _operation.CustomGradientOp(differentiable, core)

    def call(*args):
        # Symbolic Keras tensors (a functional model, another function's
        # trace): record a node in Keras' graph, as keras.ops functions do.
        if any_symbolic(args):
            return _operation.record(operation, adapter, args)
        # R may hold tensors of the code around this call (a loop of
        # jax$grad() from R): collect them if due (_memory).
        _memory.at_boundary()
        return differentiable(*args)

    call = adapter.finish(call)

    def call_from_r(*args):
        try:
            result = call(*args)
        except Exception as error:  # not an interrupt: R takes that as before
            return errors.Raised(error)
        # R holds the result until its garbage collector runs.
        return _memory.handed_to_r(result)

    call.core = core
    call.output_spec = operation.compute_output_spec
    call.from_r = adapter.finish(call_from_r)
    return call


def held_by_python(call, owner, backend=None):
    """``call`` as Python code keeps it (a Keras layer, ``jax.grad(h)``):
    the same callable, holding ``owner`` (an R object that keeps ``f``
    alive).  ``call`` itself holds R's side weakly, so that R collects it
    when R drops the function, unless Python holds such a copy.  Keras
    can't save it (as a ``Lambda`` layer's function): saving raises
    :class:`NotSerializableError` at once, where the saved model would fail
    only when loaded."""
    from customgrad import _backend
    from customgrad._keras_internals import refuse_serialization

    def held(*args):
        return call(*args)

    held = _backend.adapter(backend).finish(held)
    held.core = call.core
    held.output_spec = call.output_spec
    held.from_r = call.from_r
    held.r_owner = owner
    refuse_serialization(held, _refuse_serialization)
    return held


def _refuse_serialization():
    """Keras would save a custom-gradient function by its Python name
    (``held``), which no loading finds: R's function has none (a ``Lambda``
    layer's function, say).  ``layers.CustomGradient`` saves it instead."""
    from customgrad._keras_internals import lambda_layer_serialising

    raise NotSerializableError(layer=lambda_layer_serialising())


def grad_gets_variables(backend=None):
    """Whether the backend hands ``grad`` the variables ``f`` read, which
    only a gradient function that R runs can answer (see ``_backend``)."""
    from customgrad import _backend

    return _backend.adapter(backend).GRAD_GETS_VARIABLES
