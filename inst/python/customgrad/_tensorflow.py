"""TensorFlow: ``tf.custom_gradient`` on flat tensors.

Inputs are converted to tensors before the custom-gradient boundary, so a
Keras variable passed as an input is read outside ``f`` and its gradient
flows through that read.  Variables that ``f`` reads itself follow TF's
``variables=`` contract.
"""

import contextlib
import threading

import tensorflow as tf
from tensorflow.python.eager import forwardprop_util
from tensorflow.python.framework.ops import EagerTensor
from tensorflow.python.ops import control_flow_util

from customgrad import _bridge, _keras_internals, _memory, _serving
from customgrad.errors import (
    ThreadError,
    TransformError,
    VariablesError,
    find_error,
    raise_host_stop,
)

# A gradient TensorFlow does not need may stay None.
FILL_NONE = False
# A traced function's gradient called eagerly from R runs its replay as a
# tf.function: one graph call instead of a dozen eager ops (Python's own
# step took 190 us under tf.function against 670-690 eagerly at n = 1,
# 0.9 against 3.5-3.9 ms at 1e6, on the development machine).
COMPILES_GRADIENT_REPLAYS = True
# From a signature's second call: an eager first call costs less than
# tracing a tf.function.
COMPILES_FIRST_CALL = False
# TensorFlow hands grad the variables f read (variables=).
GRAD_GETS_VARIABLES = True


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""
    # Decorated once, not per call (tf.custom_gradient is ~60 us to apply).
    # Each call's state is on a stack: TensorFlow runs `inner` at once.
    calls = []

    @tf.custom_gradient
    def inner(*flat):
        state = calls[-1]
        leaves, spec, saved, backward = fn.forward(list(flat), state["in_spec"])
        state["spec"] = spec

        def grad_fn(*upstream, variables=None):
            # The step's R code has returned: a due collection runs here.
            _memory.at_backward()
            upstream = _bridge.fill_upstream(upstream, leaves)
            if variables:
                grads, var_grads = backward(upstream, saved, list(variables))
                return grads, _variable_gradients(var_grads, variables)
            return backward(upstream, saved)

        return (leaves[0] if len(leaves) == 1 else tuple(leaves)), grad_fn

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        # Read variables here, outside f: the read is taped and the gradient
        # flows to the variable; only variables f reads itself follow TF's
        # variables= contract.
        # tf.custom_gradient takes dense tensors only (Keras infers shapes
        # on sparse placeholders for operands it takes for sparse, `x * 2`).
        tensors = [
            tf.convert_to_tensor(t) if isinstance(t, tf.Variable) else dense(t)
            for t in tensors
        ]
        if forwardprop_util.pack_tangents(tensors).indices:
            # A forward accumulator (keras.ops.jvp) watches an input: it
            # would differentiate the forward operations, not the rule.
            raise TransformError(
                kind="forward",
                transform="tf.autodiff.ForwardAccumulator, keras.ops.jvp()",
                reverse="tape$gradient()",
                why="its rule gives vector-Jacobian products only",
            )
        state, result = _bridge.call_on_stack(calls, inner, tensors, in_spec)
        flat_out = [result] if state["spec"].num_leaves() == 1 else list(result)
        if _in_pfor():
            flat_out = [
                tf.raw_ops.PreventGradient(input=t, message=PFOR_MESSAGE)
                for t in flat_out
            ]
        return _bridge.pack(state["spec"], flat_out)

    return finish(call)


# tf.vectorized_map (pfor) converts the loop body's graph op by op and
# loses the gradient that tf.custom_gradient attaches: autodiff would
# differentiate the forward operations instead. So under pfor the value
# passes through PreventGradient, whose gradient raises with this message
# (vjp() below makes it a TransformError); the value itself is right.
PFOR_MESSAGE = (
    "customgrad_error_transform: TensorFlow's vectorized_map() can't use a "
    "custom gradient (its vectorised graph drops the rule); map with "
    "op_map() / tf.map_fn(), or use the JAX or PyTorch backend"
)


def _in_pfor():
    """Whether this call is traced as pfor's loop body, which pfor builds
    under the name scope "loop_body" (tensorflow/python/ops/parallel_for/
    control_flow_ops.py, ``_pfor_impl``; test_adapters checks it)."""
    if tf.executing_eagerly():
        return False
    scope = tf.compat.v1.get_default_graph().get_name_scope()
    return "loop_body" in scope.split("/")


def _pfor_error(error):
    """A TransformError for PreventGradient's error under pfor, else None."""
    if isinstance(error, LookupError) and "customgrad_error_transform" in str(error):
        return TransformError(
            kind="pfor",
            transform="TensorFlow's vectorized_map()",
            why="its vectorised graph drops the rule",
        )
    return None


def _variable_gradients(var_grads, variables):
    if not isinstance(var_grads, (list, tuple)):
        var_grads = [var_grads]
    if len(var_grads) != len(variables):
        raise VariablesError(expected=len(variables), returned=len(var_grads))
    # Cast to each variable's dtype, checked like the inputs' gradients.
    return [
        None
        if g is None
        else _bridge.cast_gradient(
            tf.convert_to_tensor(g), v.dtype.name, f"variable {i}"
        )
        for i, (g, v) in enumerate(zip(var_grads, variables), start=1)
    ]


def batching(flat):
    """None: under TensorFlow's vectorized_map R runs on graph tensors, as
    in any tf.function, and the gradient is refused (``_in_pfor``)."""
    return None


def finish(call):
    """Inside tf.function, AutoGraph must leave the bridge as it is."""
    return tf.autograph.experimental.do_not_convert(call)


def vjp(flat_fn, xs, make_upstream):
    """Values of ``flat_fn(*xs)`` and the gradients of
    ``sum(upstream * values)``, ``upstream = make_upstream(values)``."""
    try:
        return _vjp(flat_fn, xs, make_upstream)
    except LookupError as error:
        refused = _pfor_error(error)
        if refused is None:
            raise
        raise refused from None


def _vjp(flat_fn, xs, make_upstream):
    with tf.GradientTape() as tape:
        # Distinct tensors per argument, even if the caller passed one
        # tensor twice, or also as an argument not differentiated (which
        # this tape must not see as x); an enclosing tape records the
        # identity too.
        xs = [tf.identity(x) for x in xs]
        for x in xs:
            tape.watch(x)
        values = flat_fn(*xs)
    upstream = make_upstream(values)  # None: the tape's own ones
    grads = tape.gradient(
        values,
        xs,
        output_gradients=upstream,
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    return values, grads


def compile(fn):
    """``fn`` compiled (R runs while it is traced), its R host ops served
    (:class:`_Served`)."""
    return _Served(tf.function(fn, autograph=False))


class _Served:
    """A ``tf.function`` traced on the main thread (R runs in its trace)
    and run there, or, when its graph holds R host ops, run on a thread
    of its own while the main thread serves them (``_serving.serve``):
    TensorFlow runs a graph's host callbacks on its own threads while the
    calling thread waits. Not under a tape of the caller's, which records
    on the caller's thread only: there such a call is refused at the host
    callback, with customgrad_error_thread. Tracing first costs nothing
    here: a concrete function is called faster than the ``tf.function``
    (about 240 against 280 us, measured on the development machine)."""

    def __init__(self, function):
        self._function = function
        # Signatures TensorFlow could not trace, run eagerly (see below).
        self._eager = set()

    def __call__(self, *args):
        key = _signature(args)
        if key in self._eager:
            return self._function.python_function(*args)
        try:
            with _serving_traces():
                concrete = self._function.get_concrete_function(*args)
        except Exception as exc:  # noqa: BLE001 - decided below
            # An operation whose eager body tests a tensor's value in
            # Python (elu(x, alpha) with a tensor alpha) runs eagerly but
            # can't be staged in a graph: the replay runs eagerly, where
            # it computes what R computes. customgrad's and R's errors
            # are raised.
            if find_error(exc) is not None:
                raise
            self._eager.add(key)
            return self._function.python_function(*args)
        try:
            if getattr(concrete.graph, _HOSTS, False) and not _caller_tape():
                return _serving.serve(concrete, *args)
            return concrete(*args)
        except Exception as exc:
            raise_host_stop(exc)
            raise


def _signature(args):
    """What a ``tf.function`` traces once for: each argument's shape and
    dtype."""
    return tuple(
        None if x is None else (_bridge.static_shape(x), _bridge.dtype_of(x))
        for x in args
    )


# A FuncGraph that stages R host ops, or calls one that does, has this
# attribute set.
_HOSTS = "_customgrad_hosts"
_served = threading.local()


@contextlib.contextmanager
def _serving_traces():
    previous = getattr(_served, "tracing", False)
    _served.tracing = True
    try:
        yield
    finally:
        _served.tracing = previous


def _caller_tape():
    """Whether a tape of the calling thread could record this call (TF's
    ``record.could_possibly_record``: no public API says it)."""
    from tensorflow.python.eager import record

    return record.could_possibly_record()


class ServedStep:
    """A Keras model's compiled step (``train_function``, ``test_function``,
    ``predict_function``: see ``_model_steps``) run where R's main thread
    serves the R host ops its graph holds. At every call its graph is
    traced here, on the caller's thread (a lookup once traced), where R and
    the caller's state are (TensorFlow's tapes, Keras' dtype policy); a
    graph holding host ops then runs on a thread of its own while the main
    thread serves them (``_serving.serve``), one without runs here, as
    Keras runs it."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        traces, args = _keras_internals.step_graph_functions(self.fn, args)
        hosts = False
        with _serving_traces():
            # None where it runs eagerly (run_eagerly = TRUE): R runs here.
            for function, traced_args in traces:
                graph = function.get_concrete_function(*traced_args).graph
                hosts = hosts or getattr(graph, _HOSTS, False)
        if hosts:
            return _serving.serve(self.fn, *args, **kwargs)
        return self.fn(*args, **kwargs)


def no_grad():
    """Nothing to switch off: TensorFlow records only under a tape."""
    return contextlib.nullcontext()


def enable_float64():
    """TensorFlow computes in float64 as it is."""
    return None


def restore_float64(previous):
    """Nothing to undo."""


def on_main_thread(fn):
    """``fn()``, from a replica's thread of a ``tf.distribute`` strategy
    run on the main thread: ``merge_call()`` pauses every replica (each
    calls it, as each meets the same missing trace) and runs the first
    one's ``fn`` there. Elsewhere (another thread, where the default
    replica context would run it in place) ``fn()`` runs here."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return fn()
    return tf.distribute.get_replica_context().merge_call(lambda strategy: fn())


def nbytes(x):
    """Bytes of an eager tensor (a check against tf.Tensor is ~10x slower);
    0 for anything else."""
    if isinstance(x, EagerTensor):
        n = x.shape.num_elements()
        return (n or 0) * x.dtype.size
    return 0


def device_memory_in_use():
    """A function giving the bytes TensorFlow's allocator holds on the
    device tensors are placed on by default (the first GPU, else the CPU),
    or None where it keeps no statistics."""
    gpus = tf.config.list_logical_devices("GPU")
    device = "GPU:0" if gpus else "CPU:0"
    info = tf.config.experimental.get_memory_info
    try:
        info(device)
    except (ValueError, RuntimeError):
        return None
    return lambda: info(device)["current"]


def is_abstract(x):
    """Whether ``x`` is a graph tensor (inside tf.function), whose value R
    can't read."""
    return isinstance(x, tf.Tensor) and not isinstance(x, EagerTensor)


def host_call(fn, args, out_specs):
    """``fn`` of NumPy arrays staged as ``tf.numpy_function`` on ``args``;
    its outputs have the ``(shape, dtype)`` of ``out_specs``. It holds the
    GIL, runs only in this process and is not saved in a SavedModel.
    TensorFlow runs it on a thread of its own, where R can't run unless the
    main thread serves it: staged only where customgrad runs the graph
    (:class:`_Served`, a model's steps: :class:`ServedStep`) or where Keras
    infers shapes (the graph never runs); elsewhere (a ``tf.function`` of
    the user's) it would wait for good, so it is refused now, and so is a
    graph XLA compiles, which can't hold a host callback."""
    graph = tf.compat.v1.get_default_graph()
    if not _keras_internals.in_symbolic_scope():
        if control_flow_util.GraphOrParentsInXlaContext(graph):
            raise ThreadError(thread="XLA", host="xla")
        if not getattr(_served, "tracing", False):
            raise ThreadError(thread="TensorFlow's executor", host="staged")
    while graph is not None:
        setattr(graph, _HOSTS, True)
        graph = getattr(graph, "outer_graph", None)
    dtypes = [tf.as_dtype(dtype) for _, dtype in out_specs]
    outputs = tf.numpy_function(
        lambda *arrays: list(fn(*arrays)), list(args), dtypes, stateful=True
    )
    for out, (shape, _) in zip(outputs, out_specs):
        out.set_shape(shape)
    return outputs


def from_host(array):
    """A host callback's NumPy input as the tensor R's code expects."""
    return tf.constant(array)


def dense(x):
    """``x``, or a sparse tensor's dense value (Keras infers shapes on
    sparse placeholders for operands it takes for sparse)."""
    if isinstance(x, tf.SparseTensor):
        return tf.sparse.to_dense(x)
    return x
