"""Every part of Keras that customgrad uses beyond its public API.

Replay and saving need a few things Keras does not export: the graph that
``keras.ops`` functions record on symbolic tensors (``_keras_history``, an
operation's ``_inbound_nodes``, a node's arguments and outputs), an
operation's eager body (``operation.call``), recording a node by hand
(``operation.symbolic_call``), and a few functions under ``keras.src``.
Every other module reaches them through the small functions here, each
naming what it relies on, and ``tests/test_keras_internals.py`` checks each
one against the installed Keras: a Keras release that changes one fails
there, naming the internal and the Keras version, not deep inside a replay.
No other module of the package imports from ``keras.src`` or reads a
private attribute of a Keras object (a test checks that too).

Saved traces name each operation by its Keras config, whose module is
under ``keras.src`` (``keras.src.ops.numpy``); ``keras.saving`` resolves
it.  A trace saved with Keras 3.15 is kept as a fixture that must still
load (``tests/test_layers.py``).
"""

import collections
import importlib
import sys
import weakref

import keras

from customgrad._structure import flatten, unflatten

# The internals, by name, as the tests and their messages call them.
INTERNALS = (
    "KerasTensor._keras_history",
    "Operation._inbound_nodes",
    "Node.operation / arguments / outputs",
    "Operation.call",
    "Operation attributes hold its constructor's arguments",
    "Operations whose call differs from their keras.ops function",
    "Operations whose eager result has another structure",
    "Operation.symbolic_call",
    "keras.src.backend.compute_output_spec",
    "keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE",
    "keras.src.utils.naming.auto_name",
    "keras.ops arithmetic class names",
    "serialize_keras_object asks get_build_config()",
    "Lambda.get_config serialises its function",
    "SeedGenerator's state is named seed_generator_state",
    "StatelessScope.get_current_value is asked for every use of a value",
    "keras.src.backend.common.symbolic_scope.in_symbolic_scope",
    "TensorFlow's step functions hold their tf.functions in their closure",
    "A JAX step's purged variables hold no value and no initializer",
    "A trainer's steps are made by make_*_function() and looked up per step",
)


def keras_version():
    """The installed Keras version, for messages."""
    return getattr(keras, "__version__", "unknown")


# --- The graph of symbolic tensors -------------------------------------------

Call = collections.namedtuple(
    "Call", ["key", "operation", "args", "kwargs", "inputs", "outputs"]
)
Call.__doc__ = """One recorded call of a Keras operation: ``key`` identifies
it (the same for every output), ``args`` and ``kwargs`` are what it was
called with (symbolic tensors among them), ``inputs`` the symbolic tensors
among those, ``outputs`` the symbolic tensors it returned, flat."""


def producing_call(x):
    """The recorded call that produced the symbolic tensor ``x``, or None
    (an input, or a tensor made outside any operation).

    Relies on ``x._keras_history`` (``operation``, ``node_index``), on
    ``operation._inbound_nodes[node_index]`` being that call's node, and on
    the node's ``operation``, ``arguments.args``, ``arguments.kwargs``,
    ``arguments.keras_tensors`` and ``outputs``.
    """
    history = getattr(x, "_keras_history", None)
    if history is None or history.operation is None:
        return None
    node = history.operation._inbound_nodes[history.node_index]
    arguments = node.arguments
    return Call(
        key=id(node),
        operation=node.operation,
        args=arguments.args,
        kwargs=arguments.kwargs,
        inputs=arguments.keras_tensors,
        outputs=node.outputs,
    )


# --- Operations --------------------------------------------------------------

# Keras' elementwise arithmetic operations, by the class name ``keras.ops``
# gives each (relied on: replay runs them with the tensors' own operators).
_ARITHMETIC = {
    "Add": "add",
    "Subtract": "subtract",
    "Multiply": "multiply",
    "Divide": "divide",
    "TrueDivide": "divide",
}


def arithmetic(operation):
    """"add", "subtract", "multiply" or "divide" for the operation that
    ``keras.ops`` records for that elementwise arithmetic, else None.
    Relies on the class names of Keras' operations."""
    return _ARITHMETIC.get(type(operation).__name__)


def eager_call(operation):
    """The eager body of a Keras operation: what ``keras.ops`` runs on
    concrete tensors, without its dispatch on symbolic ones.  Relies on
    ``Operation.call`` taking the arguments the node recorded.  For the
    operations whose ``call`` computes otherwise than that (see
    ``_CALL_DIFFERS``), the ``keras.ops`` function itself with the
    operation's constructor arguments; None where those are not known."""
    public = _CALL_DIFFERS.get(
        (type(operation).__module__, type(operation).__qualname__)
    )
    if public is None:
        return operation.call
    try:
        config = operation.get_config()
    except NotImplementedError:  # arguments Keras could not keep
        return None
    config.pop("name", None)
    module, name = public
    function = getattr(importlib.import_module(module), name)
    return PublicCall(operation, function, config)


# Operations whose ``call`` computes otherwise than the ``keras.ops``
# function that records them on symbolic tensors, by class, with that
# function (Keras 3.15).  ConvTranspose.call passes ``output_padding`` as
# ``padding``; Histogram.call calls a backend function no backend has;
# GaussianBlur.call standardises ``data_format`` where the function passes
# None on (JAX and PyTorch then read the image as channels first);
# ViewAsComplex.call multiplies by ``1j``, a complex128 constant that
# TensorFlow refuses beside float32 parts.  ``tests/test_keras_internals.py``
# checks that each replays as its function computes.
_CALL_DIFFERS = {
    ("keras.src.ops.nn", "ConvTranspose"): ("keras.ops", "conv_transpose"),
    ("keras.src.ops.numpy", "Histogram"): ("keras.ops", "histogram"),
    ("keras.src.ops.image", "GaussianBlur"): ("keras.ops.image", "gaussian_blur"),
    ("keras.src.ops.math", "ViewAsComplex"): ("keras.ops", "view_as_complex"),
}


def returns_otherwise(operation):
    """Whether the active backend's eager ``operation`` returns another
    structure than Keras records (see ``_RETURNS_OTHERWISE``): code that
    reads its outputs would run otherwise on the trace."""
    kind = (type(operation).__module__, type(operation).__qualname__)
    return kind in _RETURNS_OTHERWISE.get(keras.backend.backend(), ())


# By backend, the operations whose eager result has another structure than
# the one Keras records (Keras 3.15): PyTorch's nonzero() returns one
# tensor of shape (rank, k) where Keras records a tuple of rank tensors,
# and keras3's op_nonzero() iterates over what it gets.
_RETURNS_OTHERWISE = {
    "torch": {("keras.src.ops.numpy", "Nonzero")},
}


class PublicCall:
    """The ``keras.ops`` function that recorded ``operation``, called with
    the operation's constructor arguments (its config, as Keras saves it)
    after the node's own."""

    __slots__ = ("operation", "function", "config")

    def __init__(self, operation, function, config):
        self.operation = operation
        self.function = function
        self.config = config

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs, **self.config)


def attributes(operation):
    """The instance attributes of ``operation``, by name: Keras operations
    keep their constructor's arguments there (``Clip``'s ``x_min`` and
    ``x_max``, ``Elu``'s ``alpha``) and their ``call`` reads them.  Relies
    on that."""
    return vars(operation)


def with_attributes(operation, values):
    """A shallow copy of ``operation`` whose attributes ``values`` (a dict
    by name) replace its own: the same operation on other arguments kept
    as attributes.  Relies on ``Operation.call`` reading them from the
    instance."""
    # Not copy.copy(): Keras objects pickle themselves through saving.
    copied = object.__new__(type(operation))
    vars(copied).update(vars(operation))
    vars(copied).update(values)
    return copied


def operation_of(fn):
    """The Keras operation whose :func:`eager_call` ``fn`` is (not a
    layer's), or None."""
    operation = getattr(fn, "__self__", None)
    if isinstance(fn, PublicCall):
        operation = fn.operation
    if isinstance(operation, keras.Operation) and not isinstance(
        operation, keras.Layer
    ):
        return operation
    return None


def symbolic_call(operation, *args):
    """Record a call of ``operation`` on symbolic ``args`` in Keras' graph
    and return its symbolic outputs (what ``operation(*args)`` does on
    symbolic tensors, without its traceback filtering).  Relies on
    ``Operation.symbolic_call``."""
    return operation.symbolic_call(*args)


def compute_output_spec(fn, *args):
    """The symbolic outputs of ``fn`` on symbolic ``args``, found by running
    it on the backend's placeholders (made for the tensors only: JAX can't
    make one of an argument's ``_structure.Static`` marker).  Relies on
    ``keras.src.backend.compute_output_spec``."""
    leaves, spec = flatten(list(args))

    def of_leaves(*flat):
        return fn(*unflatten(spec, list(flat)))

    return _keras_src("backend", "compute_output_spec")(of_leaves, *leaves)


# --- Dtypes and names --------------------------------------------------------


def float64_promotion():
    """What Keras' type promotion turns a float64 result into ("float32"
    on JAX and PyTorch unless customgrad turned it off, see
    :func:`float64_promotion_off`).  Relies on
    ``keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE``."""
    return _promotions().get("float64", "float64")


def float64_promotion_off():
    """Stop Keras' type promotion from turning float64 results into float32
    (it does on JAX and PyTorch, to match JAX's default); return what
    :func:`restore_float64_promotion` needs."""
    promotions = _promotions()
    previous = promotions.get("float64")
    promotions["float64"] = "float64"
    return previous


def restore_float64_promotion(previous):
    """Undo :func:`float64_promotion_off`."""
    if previous is not None:
        _promotions()["float64"] = previous


def _promotions():
    return _keras_src("backend.common.dtypes", "BIT64_TO_BIT32_DTYPE")


def auto_name(prefix):
    """A layer name made unique the way Keras names its own layers
    (``prefix``, ``prefix_1``, ...).  Relies on
    ``keras.src.utils.naming.auto_name``."""
    return _keras_src("utils.naming", "auto_name")(prefix)


# --- Random numbers ----------------------------------------------------------


def is_seed_state(variable):
    """Whether ``variable`` is a ``keras.random.SeedGenerator``'s state, which
    every draw of Keras' random numbers reads and advances, unless its seed
    is an integer (``seed = NULL`` draws from Keras' global seed
    generator).  Relies on ``SeedGenerator`` naming its state variable
    ``seed_generator_state``."""
    return getattr(variable, "name", None) == "seed_generator_state"


def in_symbolic_scope():
    """Whether Keras infers output shapes here (its ``compute_output_spec``
    runs the function on placeholders, in a graph that never runs).
    Relies on ``keras.src.backend.common.symbolic_scope.in_symbolic_scope``."""
    return _keras_src("backend.common.symbolic_scope", "in_symbolic_scope")()


# --- A model's steps ---------------------------------------------------------


STEPS = ("train", "test", "predict")


def weights_lost(model):
    """Whether ``model``'s variables were purged by Keras' JAX trainer and
    never given back (its compiled step failed after taking them): reading
    one would fail.  Relies on Keras' JAX trainer purging a variable by
    setting ``_value`` to None, and a variable once initialized keeping no
    ``_initializer``."""
    return any(
        v._value is None and getattr(v, "_initializer", None) is None
        for v in model.variables
    )


def wrap_steps(model, wrap, check=None):
    """Have ``model``'s trainer run ``wrap(kind, fn)`` for each step
    function ``fn`` it makes (``kind`` in :data:`STEPS`), and
    ``wrap("build", fn)`` for the symbolic build that ``fit()`` and
    ``evaluate()`` begin with, on this instance only.
    Relies on Keras' trainers making ``model.<kind>_function`` in
    ``model.make_<kind>_function()`` (again after ``compile()`` resets it,
    and before ``fit()``, ``evaluate()`` and ``predict()`` read the model's
    variables: ``check(model)`` runs first there) and looking it up on the
    model at every step, and on ``model._symbolic_build()`` (which runs
    the layers' calls on PyTorch)."""
    build = model._symbolic_build
    if not getattr(build, "customgrad_wraps", False):
        model._symbolic_build = wrap("build", build)
    for kind in STEPS:
        make = getattr(model, f"make_{kind}_function")
        if getattr(make, "customgrad_wraps", False):
            continue
        setattr(model, f"make_{kind}_function", _StepMaker(model, kind, make, wrap, check))
        # A step made before (compile() resets it the same way) is made
        # again: TensorFlow refuses to create variables in any trace of a
        # tf.function but its first, and a refused trace was one.
        if getattr(model, f"{kind}_function", None) is not None:
            setattr(model, f"{kind}_function", None)


def step_graph_functions(step, args):
    """``(traces, args)``: the ``(tf_function, args)`` calls through which
    TensorFlow's Keras ``step(*args)`` traces its graphs, and the
    arguments to call ``step`` with (an iterator of data items is read
    here, and handed on as a new one); ``traces`` is empty where the step
    runs eagerly (``run_eagerly``).  Relies on Keras' TensorFlow trainer:
    ``train_function`` and ``test_function`` are closures over the
    ``tf.function`` ``multi_step_on_iterator``, called on a ``tf.data``
    iterator, and over the ``tf.function`` ``one_step_on_data`` (inside
    ``_autoconvert_optionals()``'s wrapper), called on each item of any
    other iterator (``train_on_batch()``); ``predict_function`` is the
    ``tf.function`` itself."""
    import tensorflow as tf

    if hasattr(step, "get_concrete_function"):
        return [(step, args)], args
    found = _closure_functions(step)
    if isinstance(args[0], (tf.data.Iterator, tf.distribute.DistributedIterator)):
        function = found.get("multi_step_on_iterator")
        return ([(function, args)] if function is not None else []), args
    function = found.get("one_step_on_data")
    if function is None:
        return [], args
    items = list(args[0])
    return [(function, (item,)) for item in items], (iter(items), *args[1:])


def _closure_functions(fn, depth=2):
    """The ``tf.function`` objects in ``fn``'s closure, ``depth`` closures
    deep, by the name of the Python function each wraps (a wrapper made
    with ``functools.wraps`` has the same name)."""
    found = {}
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            obj = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if not callable(obj):
            continue
        if hasattr(obj, "get_concrete_function"):
            found.setdefault(obj.python_function.__name__, obj)
        elif depth > 1:
            for name, inner in _closure_functions(obj, depth - 1).items():
                found.setdefault(name, inner)
    return found


class _StepMaker:
    """``model.make_<kind>_function``, whose step it wraps (once)."""

    customgrad_wraps = True

    def __init__(self, model, kind, make, wrap, check):
        # Weakly: the model holds this maker.
        self.model = weakref.ref(model)
        self.kind = kind
        self.make = make
        self.wrap = wrap
        self.check = check

    def __call__(self, *args, **kwargs):
        model = self.model()
        if self.check is not None:
            self.check(model)
        made = self.make(*args, **kwargs)
        name = f"{self.kind}_function"
        fn = getattr(model, name, None)
        if fn is not None and not getattr(fn, "customgrad_wraps", False):
            fn = self.wrap(self.kind, fn)
            setattr(model, name, fn)
        return fn if made is not None else made


# --- Saving ------------------------------------------------------------------


def refuse_serialization(obj, refuse):
    """Make Keras' serializer call ``refuse()``, which raises, when it meets
    ``obj`` (a function Keras would save by a name that loading can't
    find), instead of saving it.  Relies on
    ``keras.saving.serialize_keras_object`` asking every object it
    serialises, functions included, for ``get_build_config()`` if it has
    one."""
    obj.get_build_config = refuse


def lambda_layer_serialising():
    """The name of the ``Lambda`` layer whose config Keras is making (the
    nearest on the call stack), or None.  Relies on ``Lambda.get_config``
    serialising its function in a frame whose ``self`` is the layer."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, keras.layers.Lambda):
            return owner.name
        frame = frame.f_back
    return None


# --- keras.src ---------------------------------------------------------------

_found = {}


def _keras_src(module, name):
    """``name`` from ``keras.src.<module>``, imported at first use (a call
    costs a dict lookup after that: one of these runs at every call of a
    custom-gradient function)."""
    found = _found.get((module, name))
    if found is None:
        found = getattr(importlib.import_module("keras.src." + module), name)
        _found[module, name] = found
    return found
