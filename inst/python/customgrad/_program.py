"""Compile a graph of Keras operations into flat programs and run them.

R runs ``f`` and ``grad`` once on Keras symbolic tensors (``KerasTensor``):
every ``keras.ops`` function called on them, from keras3's ``op_*()`` or
from R arithmetic, records a ``Node`` (the operation, its arguments, its
outputs).  :func:`compile_programs` walks those nodes back from ``f``'s value
and ``grad``'s gradients and writes two flat lists of calls over numbered
slots: the forward program (inputs to value) and the backward program
(upstream and the forward slots it reads to the gradients).  Running a
program is a loop of backend calls, each operation's eager body (see
``_keras_internals``), which is what ``keras.ops`` runs eagerly too;
Keras' own ``Function`` costs several times more per call for its
generality.
"""

import operator
import re

import keras
from keras import KerasTensor

from customgrad import _keras_internals

# Keras' elementwise arithmetic, replayed with the tensors' own operators
# where the trace shows the result is the same (see _native_arithmetic()):
# they skip Keras' argument conversion and dtype resolution, which costs
# more than the operation on small tensors.
_NATIVE = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
}


class GraphError(Exception):
    """The graph can't be compiled (the signature falls back to calling R)."""


class Nested:
    """An argument that holds symbolic tensors inside lists, tuples or dicts."""

    __slots__ = ("template",)

    def __init__(self, template):
        self.template = template


class Slot:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class Step:
    """One call: ``fn(*args, **kwargs)`` with slots filled in, its outputs
    written to ``outputs`` (a single slot index, or a list of them)."""

    __slots__ = ("fn", "args", "kwargs", "slot_args", "nested", "outputs", "single")

    def __init__(self, fn, args, kwargs, slot_args, nested, outputs):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.slot_args = slot_args  # [(position, slot)] of bare tensors
        self.nested = nested  # whether any argument needs _fill()
        self.outputs = outputs
        self.single = len(outputs) == 1


class Program:
    """A flat list of steps; ``run(values)`` fills ``values`` in place,
    emptying each slot a step wrote once no later step reads it, unless it
    is in ``keep`` (read after the run).

    A plain loop: Python source written out per trace ran log1pexp's two
    programs (8 steps) 5-12 us faster, under 1.5% of an ``op_grad()``
    step at n = 1 on each backend, and ``make bench``'s whole loops could
    not tell the two apart (bench/README.md, runs 2026-12-03).
    """

    __slots__ = ("steps", "_plan")

    def __init__(self, steps, keep):
        self.steps = steps
        done_after = _last_reads(steps, set(keep))
        self._plan = [
            (step.fn, step.args, step.kwargs, step.slot_args, step.nested,
             step.outputs, step.single, done_after.get(i, ()))
            for i, step in enumerate(steps)
        ]  # fmt: skip

    def __len__(self):
        return len(self.steps)

    def constants(self):
        """What the steps read that no slot holds: the values the trace
        captured (tensors, Keras variables, options)."""
        for step in self.steps:
            for leaf in _leaves((step.args, step.kwargs)):
                if leaf is not None and not isinstance(leaf, Slot):
                    yield leaf

    def run(self, values):
        for fn, args, kwargs, slot_args, nested, outputs, single, done in self._plan:
            if nested:
                result = fn(
                    *[_fill(a, values) for a in args],
                    **{k: _fill(v, values) for k, v in kwargs.items()},
                )
            else:
                if slot_args:
                    args = list(args)
                    for position, slot in slot_args:
                        args[position] = values[slot]
                result = fn(*args, **kwargs)
            if single and not isinstance(result, (list, tuple, dict)):
                values[outputs[0]] = result
            else:
                for slot, value in zip(outputs, keras.tree.flatten(result)):
                    values[slot] = value
            # As Python frees a temporary: at n = 1e6 on TensorFlow a
            # program holding every slot to its end took 1.39x Python's
            # step against 1.17-1.22x (median ratios, 2026-11-30:
            # bench/results/2026-11-28-to-12-01-history.md).
            for slot in done:
                values[slot] = None


def _last_reads(steps, keep):
    """For each step's index, the slots written by ``steps`` that no step
    after it reads, leaving out ``keep``."""
    last = {}
    for i, step in enumerate(steps):
        for slot in step.outputs:
            last[slot] = i
        for slot in _step_slots(step):
            if slot in last:
                last[slot] = i
    done_after = {}
    for slot, i in last.items():
        if slot not in keep:
            done_after.setdefault(i, []).append(slot)
    return done_after


def _fill(arg, values):
    if isinstance(arg, Slot):
        return values[arg.index]
    if isinstance(arg, Nested):
        return _fill(arg.template, values)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_fill(a, values) for a in arg)
    if isinstance(arg, dict):
        return {k: _fill(v, values) for k, v in arg.items()}
    return arg


class Compiled:
    """The forward and backward programs of one trace.

    ``n_inputs`` slots hold the inputs, then the forward program's slots,
    then ``n_upstream`` upstream slots and the backward program's.
    ``value`` and ``grads`` are output leaves: a slot index, or
    ``("const", x)`` for a value that does not depend on the inputs.
    ``saved`` are the forward slots the backward pass reads.
    """

    __slots__ = (
        "forward", "backward", "n_slots", "n_inputs", "upstream_start",
        "n_upstream", "value", "grads", "saved",
    )  # fmt: skip


def compile_programs(inputs, value, upstream, grads):
    """Compile ``f``'s graph (``inputs`` to the ``value`` leaves) and
    ``grad``'s (``upstream`` and the forward graph to the ``grads`` leaves).

    ``inputs`` and ``upstream`` are lists of KerasTensors; ``value`` and
    ``grads`` lists of KerasTensors, constants or None.
    """
    slots = {}
    for x in inputs:
        _assign(slots, x)
    forward = _compile(value, slots)
    n_forward = len(slots)
    upstream_start = n_forward
    for x in upstream:
        _assign(slots, x)
    backward = _compile(grads, slots)
    compiled = Compiled()
    compiled.n_slots = len(slots)
    compiled.n_inputs = len(inputs)
    compiled.upstream_start = upstream_start
    compiled.n_upstream = len(upstream)
    compiled.value = [_leaf(x, slots) for x in value]
    compiled.grads = [_leaf(x, slots) for x in grads]
    read = set()
    for step in backward:
        read.update(_step_slots(step))
    read.update(g for g in compiled.grads if isinstance(g, int))
    compiled.saved = sorted(s for s in read if s < n_forward)
    set_programs(compiled, forward, backward)
    return compiled


def set_programs(compiled, forward, backward):
    """Give ``compiled`` (its leaves and ``saved`` set) its programs of the
    ``forward`` and ``backward`` steps; each keeps the slots read after it."""
    kept = [x for x in compiled.value if isinstance(x, int)]
    compiled.forward = Program(forward, keep=compiled.saved + kept)
    grads = [x for x in compiled.grads if isinstance(x, int)]
    compiled.backward = Program(backward, keep=grads)


def fingerprint(compiled):
    """What ``compiled``'s programs call, and on what kinds of arguments:
    equal for two traces of the same R code (a function made anew at each
    call of a loop, whose traces hold new operation objects), unequal as a
    rule for other code. A hint, never a key to a result: two programs may
    share one (numbers and tensors count by kind, not by value)."""
    return (
        compiled.n_inputs,
        compiled.n_upstream,
        tuple(_kind(x) for x in compiled.value),
        tuple(_kind(x) for x in compiled.grads),
        tuple(_step_kind(step) for step in compiled.forward.steps),
        tuple(_step_kind(step) for step in compiled.backward.steps),
    )


def _step_kind(step):
    return (
        _callable_kind(step.fn),
        tuple(_kind(a) for a in step.args),
        tuple((k, _kind(v)) for k, v in sorted(step.kwargs.items(), key=_name)),
        tuple(step.slot_args),
        tuple(step.outputs),
    )


def _callable_kind(fn):
    operation = _keras_internals.operation_of(fn)
    if operation is None:
        return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", type(fn).__name__))
    kind = [type(operation).__module__, type(operation).__qualname__]
    for name, value in sorted(_keras_internals.attributes(operation).items(), key=_name):
        if not name.startswith("_") and name != "name":
            kind.append((name, _kind(value)))
    entry = getattr(operation, "entry", None)  # a custom gradient's trace
    if getattr(entry, "compiled", None) is not None:
        kind.append(fingerprint(entry.compiled))
    return tuple(kind)


def _name(item):
    return str(item[0])


def _kind(x):
    if isinstance(x, Slot):
        return ("slot", x.index)
    if isinstance(x, Nested):
        return ("nested", _kind(x.template))
    if isinstance(x, (list, tuple)):
        return tuple(_kind(v) for v in x)
    if isinstance(x, dict):
        return tuple((str(k), _kind(v)) for k, v in sorted(x.items(), key=_name))
    if x is None or isinstance(x, (str, bool)):
        return x
    shape = getattr(x, "shape", None)
    if shape is not None:
        return (type(x).__name__, tuple(shape), str(getattr(x, "dtype", "")))
    return type(x).__name__


def _assign(slots, x):
    if id(x) in slots:
        raise GraphError("The same symbolic tensor is given twice as an input.")
    slots[id(x)] = len(slots)


def _leaf(x, slots):
    if isinstance(x, KerasTensor):
        return slots[id(x)]
    return ("const", x)


def _step_slots(step):
    if not step.nested:
        return [slot for _, slot in step.slot_args]
    leaves = _leaves((step.args, step.kwargs))
    return [leaf.index for leaf in leaves if isinstance(leaf, Slot)]


def _leaves(arg):
    """The slots and values in a step's arguments, through nesting."""
    if isinstance(arg, Nested):
        yield from _leaves(arg.template)
    elif isinstance(arg, (list, tuple)):
        for a in arg:
            yield from _leaves(a)
    elif isinstance(arg, dict):
        for a in arg.values():
            yield from _leaves(a)
    else:
        yield arg


def _call_of(x):
    call = _keras_internals.producing_call(x)
    if call is None:
        raise GraphError(
            "A symbolic tensor in the result does not come from the inputs "
            "of `f` (a tensor from another model or trace?)."
        )
    return call


def _compile(leaves, slots):
    """Steps computing ``leaves`` from what ``slots`` already holds, in
    dependency order (an explicit stack: R loops can build long chains)."""
    steps = []
    done = set()
    stack = [(x, False) for x in reversed(leaves) if isinstance(x, KerasTensor)]
    while stack:
        x, ready = stack.pop()
        if id(x) in slots and not ready:
            continue
        call = _call_of(x)
        if call.key in done:
            continue
        if ready:
            steps.append(_step(call, slots))
            done.add(call.key)
            continue
        stack.append((x, True))
        for arg in reversed(_inputs_of(call)):
            if id(arg) not in slots:
                stack.append((arg, False))
    return steps


def _step(call, slots):
    for out in call.outputs:
        slots[id(out)] = len(slots)
    operation = call.operation
    args = list(call.args)
    # Layers go through __call__ (building, masking); plain operations run
    # their eager body directly, as keras.ops does outside a trace.
    if isinstance(operation, keras.Layer):
        fn = operation
    else:
        fn = _native_arithmetic(call)
        if fn is None:
            fn, attributes = _eager_body(operation)
            if attributes:
                args.append(attributes)  # filled in at each replay
    kwargs = dict(call.kwargs)
    if _keras_internals.returns_otherwise(operation):
        raise GraphError(
            f"Keras records `op_{_snake(type(operation).__name__)}()` with "
            f"other outputs than {keras.backend.backend()} gives it."
        )
    held = (args, kwargs)
    if not isinstance(operation, keras.Layer):  # (a layer is called whole)
        held += (_keras_internals.attributes(operation),)
    if any(_is_r_function(a) for a in _leaves(held)):
        # op_cond(), op_map(), op_fori_loop() and the like hold R closures
        # (as arguments or attributes), which a replay would call in R and
        # which may read the trace's own tensors.
        name = _snake(type(operation).__name__)
        raise GraphError(
            f"It passes an R function to `op_{name}()`, which a replay "
            "would have to run in R."
        )
    slot_args = []
    nested = False
    for i, a in enumerate(args):
        if isinstance(a, KerasTensor):
            slot_args.append((i, slots[id(a)]))
        elif holds(a, KerasTensor):
            args[i] = Nested(_template(a, slots))
            nested = True
    for k, v in kwargs.items():
        if holds(v, KerasTensor):
            kwargs[k] = Nested(_template(v, slots))
            nested = True
    if nested:
        # The generic path fills every argument; make bare tensors slots too.
        for i, slot in slot_args:
            args[i] = Slot(slot)
        slot_args = []
    outputs = [slots[id(out)] for out in call.outputs]
    return Step(fn, tuple(args), kwargs, slot_args, nested, outputs)


def _inputs_of(call):
    """The symbolic tensors ``call`` reads: its arguments', and those its
    operation keeps as attributes (see :func:`_eager_body`)."""
    inputs = list(call.inputs)
    for value in _keras_internals.attributes(call.operation).values():
        if holds(value, KerasTensor):
            inputs.extend(x for x in _leaves(value) if isinstance(x, KerasTensor))
    return inputs


def _eager_body(operation):
    """``(fn, attributes)``: the eager body that replays ``operation`` as
    the ``keras.ops`` function that recorded it ran, and, for an operation
    that keeps symbolic tensors as attributes (``clip(x, lo, hi)``'s
    bounds, ``elu(x, alpha)``'s alpha), those attributes, a last argument
    of ``fn`` that the replay fills in like any other.

    Two things in an operation's attributes would not replay as the call
    ran: a symbolic tensor (the trace's, which no backend can compute on)
    and a list of integers where the function had an integer (``Norm``
    and ``Quantile`` keep ``axis = 1`` as ``[1]``, a list that JAX refuses
    as a static argument). The list becomes a tuple, which every backend
    takes as that axis."""
    own = _keras_internals.attributes(operation)
    fixed = {
        name: tuple(value)
        for name, value in own.items()
        if isinstance(value, list) and value and all(_is_int(v) for v in value)
    }
    if fixed:
        operation = _keras_internals.with_attributes(operation, fixed)
    symbolic = {name: v for name, v in own.items() if holds(v, KerasTensor)}
    if symbolic:
        return _WithAttributes(operation), symbolic
    body = _keras_internals.eager_call(operation)
    if body is None:
        raise GraphError(
            f"Keras' `{type(operation).__name__}` operation does not keep "
            "the arguments it was called with, so it can't be replayed."
        )
    return body, None


def _is_r_function(x):
    """Whether ``x`` is an R function as reticulate hands it to Python."""
    return callable(x) and getattr(x, "__module__", None) == "rpytools.call"


def _snake(name):
    """``ForiLoop`` as ``fori_loop``: an operation class as keras3 names
    its function (after ``op_``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class _WithAttributes:
    """An operation's eager body on a copy of it whose symbolic attributes
    are the replay's values, given as the call's last argument (a dict by
    name): the operation itself is shared by every replay, and a trace may
    be replayed on several threads."""

    __slots__ = ("operation",)

    def __init__(self, operation):
        self.operation = operation

    def __call__(self, *args, **kwargs):
        *args, values = args
        copied = _keras_internals.with_attributes(self.operation, values)
        return _keras_internals.eager_call(copied)(*args, **kwargs)


def _native_arithmetic(call):
    """The Python operator for an elementwise Add/Subtract/Multiply/Divide
    whose operands are floating tensors of one dtype, or one floating tensor
    and a Python number: there every backend's operator gives what Keras
    gives (the tensor's dtype, weak-typed numbers), so Keras' conversions
    can be skipped.  None otherwise."""
    native = _NATIVE.get(_keras_internals.arithmetic(call.operation))
    args = call.args
    if native is None or call.kwargs or len(args) != 2:
        return None
    dtypes = [a.dtype for a in args if isinstance(a, KerasTensor)]
    numbers = [
        a for a in args
        if isinstance(a, (int, float)) and not isinstance(a, bool)
    ]  # fmt: skip
    if len(dtypes) + len(numbers) != 2 or not dtypes:
        return None
    if len(set(dtypes)) != 1 or not dtypes[0].startswith(("float", "bfloat")):
        return None
    out = call.outputs[0]
    if out.dtype != dtypes[0]:
        return None
    return native


def holds(a, kind):
    """Whether ``a`` is an instance of ``kind`` or holds one inside lists,
    tuples or dicts (a trace's symbolic tensor, a saved step's slot)."""
    if isinstance(a, kind):
        return True
    if isinstance(a, (list, tuple)):
        return any(holds(x, kind) for x in a)
    if isinstance(a, dict):
        return any(holds(x, kind) for x in a.values())
    return False


def _template(a, slots):
    if isinstance(a, KerasTensor):
        return Slot(slots[id(a)])
    if isinstance(a, (list, tuple)):
        return type(a)(_template(x, slots) for x in a)
    if isinstance(a, dict):
        return {k: _template(v, slots) for k, v in a.items()}
    return a
