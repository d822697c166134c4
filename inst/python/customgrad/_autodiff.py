"""Gradients, vector-Jacobian products and compiled calls of R functions.

R hands this module ``fn``, an R callback that takes the tensors to
differentiate (nests of lists and dicts allowed) and returns a nest of
tensors.  The module runs it under the active backend's autodiff:

* TensorFlow: a ``tf.GradientTape`` (not persistent: one gradient call).
  Nested tapes make gradients of gradients.
* JAX: ``jax.vjp``, which composes with ``jax.jit``, ``jax.grad`` and itself.
* PyTorch: ``torch.autograd.grad`` on fresh leaves, or on views of inputs
  that already carry autograd history (so that an outer gradient flows
  through).  The caller's tensors keep their ``requires_grad`` and ``.grad``.
  With grad mode on, the gradient is built with ``create_graph=True`` where
  it may be differentiated again (an input with history, a tensor ``fn``
  reads that requires grad, a gradient of a gradient; ``_torch.vjp``).

R is entered only through :func:`customgrad._bridge.call_r`.
"""

import collections

import keras

from customgrad import _backend, _bridge, _host, _memory, _messages, _program, _trace
from customgrad._keras_internals import symbolic_call
from customgrad._structure import any_symbolic, flatten, unflatten
from customgrad._traced_function import GradientOp, TracedFunction
from customgrad.errors import DtypeError, NotScalarError, UpstreamError, find_error

__all__ = [
    "DtypeError",
    "NotScalarError",
    "UpstreamError",
    "compile_function",
    "enable_float64",
    "restore_float64",
    "value_and_grad",
]


def value_and_grad(fn, positions=None, backend=None, wrt=None, grads_only=False):
    """Return ``call(upstream, *args)`` for ``fn``, which replies
    :func:`_messages.value_and_grad_reply`, or with ``grads_only`` only the
    gradients: the one argument's, or a list of them for several.

    ``fn(*args)`` returns the value, a nest of tensors: an R callback, or a
    :class:`_traced_function.TracedFunction`, called as it is.  With
    ``upstream`` None the value must be one tensor with one element;
    otherwise ``upstream`` has the value's nesting and shapes, and
    ``grads`` is the vector-Jacobian product.  ``wrt`` (0-based) are the
    arguments differentiated, all of them if None; the others reach ``fn``
    as they are.  ``grads`` has one entry per argument differentiated, each
    with its argument's nesting.  ``positions`` (1-based argument positions
    in the R call) name those arguments in error messages.

    Called on Keras symbolic tensors (another function being traced), the
    call is recorded as one :class:`_traced_function.GradientOp` node.
    """
    adapter = _backend.adapter(backend)
    vjp = adapter.vjp
    if isinstance(fn, TracedFunction):
        run = fn
    else:

        def run(*args):
            return _bridge.call_r(fn, *args)

    def concrete(upstream, *args):
        args = list(args)
        which = range(len(args)) if wrt is None else list(wrt)
        leaves, spec = flatten([args[i] for i in which])
        tensors = differentiable_inputs(leaves, spec, positions)
        out = {}

        def flat_fn(*flat):
            full = list(args)
            for i, arg in zip(which, unflatten(spec, list(flat))):
                full[i] = arg
            value_leaves, out["spec"] = flatten(run(*full))
            return [_bridge.to_tensor(v) for v in value_leaves]

        def make_upstream(values):
            return _upstream_tensors(upstream, values, out["spec"])

        values, grads = vjp(flat_fn, tensors, make_upstream)
        return _messages.value_and_grad_reply(
            unflatten(out["spec"], list(values)), unflatten(spec, list(grads))
        )

    replays = None
    if isinstance(fn, TracedFunction) and adapter.COMPILES_GRADIENT_REPLAYS:
        replays = _CompiledCalls(
            concrete, fn, adapter.compile, adapter.COMPILES_FIRST_CALL
        )

    def call(upstream, *args):
        if any_symbolic([upstream, list(args)]):
            traced = fn if isinstance(fn, TracedFunction) else None
            reply = symbolic_call(GradientOp(concrete, traced, wrt), upstream, *args)
            return _grads_alone(reply) if grads_only else reply
        # Called from R, which holds the result until its collector runs:
        # counted, so that R collects before such results pile up (_memory).
        reply = None if replays is None else replays.run(upstream, args)
        if reply is None:
            reply = _memory.call_from_r(concrete, upstream, *args)
        _bridge.release_to_r()
        # R converts a dict reply item by item (~60 us a step at n = 1); a
        # gradient alone reaches it as the tensor it is.
        return _grads_alone(reply) if grads_only else reply

    return call


def _grads_alone(reply):
    grads = reply["grad"]
    return grads[0] if len(grads) == 1 else grads


def flat_function(fn, spec):
    """Wrap the R ``fn`` into a function of flat tensors returning flat
    tensors."""
    out = {}

    def flat_fn(*flat):
        args = unflatten(spec, list(flat))
        value = _bridge.call_r(fn, *args)
        leaves, value_spec = flatten(value)
        out["spec"] = value_spec
        return [_bridge.to_tensor(v) for v in leaves]

    return flat_fn, out


def differentiable_inputs(leaves, spec, positions):
    """Tensors for ``leaves``; each must have a floating dtype."""
    owners = _leaf_owners(spec)
    tensors = []
    for leaf, owner in zip(leaves, owners):
        tensor = _bridge.to_tensor(leaf)
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if not keras.backend.is_float_dtype(dtype):
            where = owner + 1
            if positions is not None:
                where = list(positions)[owner]
            raise DtypeError(argument=where, dtype=dtype)
        tensors.append(tensor)
    return tensors


def _leaf_owners(spec):
    """For each leaf of a list of arguments, the index of its argument."""
    owners = []
    for i, child in enumerate(spec.children):
        owners.extend([i] * child.num_leaves())
    return owners


def _upstream_tensors(upstream, values, value_spec):
    """One upstream tensor per value tensor, checked and cast to its dtype;
    None for the gradient of a one-element value (the backend's vjp seeds
    it with ones, without an op of ours)."""
    if upstream is None:
        if len(values) != 1 or not _has_one_element(values[0]):
            raise NotScalarError(
                shapes=[_bridge.format_shape(_bridge.static_shape(v)) for v in values]
            )
        return None
    leaves, spec = flatten(upstream)
    if not spec.same_as(value_spec):
        raise UpstreamError(
            problem="nesting", n_values=len(values), n_upstream=len(leaves)
        )
    result = []
    for i, (u, v) in enumerate(zip(leaves, values), start=1):
        u = _bridge.to_tensor(u)
        u_shape, v_shape = _bridge.static_shape(u), _bridge.static_shape(v)
        if not _bridge.shapes_match(u_shape, v_shape):
            raise UpstreamError(
                problem="shape",
                tensor=None if spec.is_leaf else i,
                upstream_shape=_bridge.format_shape(u_shape),
                value_shape=_bridge.format_shape(v_shape),
            )
        result.append(keras.ops.cast(u, keras.backend.standardize_dtype(v.dtype)))
    return result


def _has_one_element(x):
    shape = _bridge.static_shape(x)
    return shape is None or all(d is None or d == 1 for d in shape)


# --- Backends ---------------------------------------------------------------


def vjp_for(backend=None):
    """The backend's ``vjp(flat_fn, xs, make_upstream)`` (see ``_backend``)."""
    return _backend.adapter(backend).vjp


def enable_float64(backend=None):
    """Make Keras ops compute in float64; return what :func:`restore_float64`
    needs (JAX needs ``jax_enable_x64``; on JAX and PyTorch, Keras' type
    promotion must keep float64 results float64)."""
    return [backend, _backend.adapter(backend).enable_float64()]


def restore_float64(previous):
    """Undo :func:`enable_float64`."""
    backend, state = previous
    _backend.adapter(backend).restore_float64(state)


# --- Compiled calls -----------------------------------------------------------


def compile_function(fn, backend=None):
    """Compile ``fn``, a :class:`_traced_function.TracedFunction`, with the
    backend's compiler: ``tf.function`` on TensorFlow, ``jax.jit`` on JAX;
    on PyTorch the replay runs as it is.  Returns ``call(args)``, which
    calls ``fn(*args)`` compiled.  Arguments and the result are nests of
    tensors, with :class:`_structure.Static` markers among the arguments:
    one compiled function per nesting (markers included), of the flat
    tensors, so that the compilers see tensors only.
    """
    adapter = _backend.adapter(backend)
    compiled = _CompiledByKey()  # nesting's key -> compiled function
    compiles_r = not fn.trace  # trace = FALSE: the compiler runs R's code

    def call(args):
        leaves, spec = flatten(list(args))
        eager = _Flat(fn, spec)
        abstract = _host.is_abstract(leaves)  # inside another trace
        result = _EAGER
        # Called on values, a traced fn that no longer replays (R's values it
        # read changed) or whose trace fell back runs R at every call, as the
        # fallback's message says: compiled, R would run once, at compile.
        if compiles_r or abstract or fn.trace_for(*args) is not None:
            run = compiled.get(spec.key)
            if run is None:
                run = compiled.add(spec.key, adapter.compile(eager))
            if run is not _EAGER:
                # Inside another trace, or with R's code compiled, a failure
                # is no refusal of a replay's: it is what R's code would do.
                refusable = not compiles_r and not abstract
                result = compiled.run(spec.key, run, leaves, refusable)
        if result is _EAGER:
            result = _memory.call_from_r(_run_plain, eager, leaves)
        _bridge.release_to_r()
        return result

    return call


class _CompiledCalls:
    """``concrete(upstream, *args)`` compiled by ``compile``, of the flat
    tensors: one compiled function per signature, as the trace cache keys
    them (each traced once, so that TensorFlow sees no retracing to warn
    of), and per upstream given or not.  ``traced`` is the
    :class:`_traced_function.TracedFunction` that ``concrete`` calls."""

    def __init__(self, concrete, traced, compile, compile_first=False):
        self._concrete = concrete
        self._traced = traced
        self._compile = compile
        self._compile_first = compile_first
        self._called = collections.OrderedDict()  # keys whose first call was made
        called = self._called  # not self: no cycle to keep the functions alive
        self._compiled = _CompiledByKey(on_evict=lambda key: called.pop(key, None))

    def run(self, upstream, args):
        """The reply of this call, compiled; or None where it runs eagerly:
        R at every call, a signature's first call (see
        :meth:`_compiles_now`), one that falls back to
        R, or one the backend's compiler refused (JAX's jit of an op whose
        output shape depends on values, ``op_nonzero()``), which the eager
        call computes as R does, or fails as it would."""
        if not self._traced.trace:
            return None  # R at every call; its arguments may be no tensors
        leaves, spec = flatten([upstream, *args])
        tensors = [x for x in leaves if x is not None]  # upstream None
        if _host.is_abstract(tensors):
            # Inside another trace (tf.function, pfor, jax.jit, jax.vmap),
            # which compiles it, and refuses what it can't transform.
            return None
        key = (upstream is None, _trace.signature(tensors, spec))
        entry = self._compiled.get(key)
        if entry is _EAGER:
            return None
        if entry is None:
            if not self._compiles_now(key, args):
                return None
            entry = self._compiled.add(key, self._compile(_Flat(self._concrete, spec)))
        reply = self._compiled.run(key, entry, leaves)
        return None if reply is _EAGER else reply

    def _compiles_now(self, key, args):
        """Whether a signature with nothing compiled compiles at this call.

        A function made anew at every call (`op_grad(loss)(w, x)` in a
        loop) would pay a compile a call (97 against 10 ms a call on JAX,
        49 against 12 on TensorFlow, for a small model's loss on the
        development machine): so a signature's first call runs eagerly,
        compiled from its second. Where the backend's eager first call
        costs more than its compile (``compile_first``: JAX compiles each
        operation of an eager call for its shapes, 60-340 against 57-80 ms
        for a custom gradient of one op), the first call compiles, unless
        the same programs were compiled before (by their
        :func:`_program.fingerprint`): then the function is most likely
        made anew, and runs eagerly as above.
        """
        first = key not in self._called
        if first:
            self._called[key] = None
            if len(self._called) > 4 * _MAX_COMPILED:
                self._called.popitem(last=False)
            if not self._compile_first:
                return False
        trace = self._traced.trace_for(*args)  # the first call's, from the second
        if trace is None:
            return False
        if not first:
            return True
        kind = (key, _program.fingerprint(trace.compiled))
        if kind in _compiled_kinds:
            _compiled_kinds.move_to_end(kind)
            return False
        _compiled_kinds[kind] = None
        if len(_compiled_kinds) > _MAX_KINDS:
            _compiled_kinds.popitem(last=False)
        return True


class _CompiledByKey:
    """Compiled functions by key, at most ``_MAX_COMPILED``, the oldest
    evicted first (``on_evict(key)``).  A compiled function's first failure
    is its compiler's refusal (JAX's jit of ``op_nonzero()``, whose output
    shape depends on values): its key then runs eagerly, which computes
    what R does, or fails as R's code would."""

    def __init__(self, on_evict=None):
        self._fns = collections.OrderedDict()  # key -> compiled, or _EAGER
        self._proven = set()  # keys whose compiled function has run once
        self._on_evict = on_evict

    def get(self, key):
        """The key's compiled function, ``_EAGER``, or None."""
        return self._fns.get(key)

    def add(self, key, fn):
        if len(self._fns) >= _MAX_COMPILED:
            evicted = self._fns.popitem(last=False)[0]
            self._proven.discard(evicted)
            if self._on_evict is not None:
                self._on_evict(evicted)
        self._fns[key] = fn
        return fn

    def run(self, key, fn, leaves, refusable=True):
        """``fn(*leaves)`` for R, or ``_EAGER`` where it failed at the key's
        first call, ``refusable`` and not in R's code (the key is marked to
        run eagerly from now on)."""
        try:
            reply = _memory.call_from_r(_run_plain, fn, leaves)
        except Exception as exc:
            if (not refusable or key in self._proven
                    or find_error(exc) is not None):  # fmt: skip
                raise
            self._fns[key] = _EAGER
            return _EAGER
        self._proven.add(key)
        return reply


_EAGER = object()

# The fingerprints of the programs compiled at a first call, the latest
# last: a function whose programs are among them is taken for one made anew.
_compiled_kinds = collections.OrderedDict()
_MAX_KINDS = 256


def _run_plain(run, leaves):
    return _plain_dicts(run(*leaves))


# Compiled functions kept per compiled R function (one per nesting).
_MAX_COMPILED = 32


class _Flat:
    """``fn`` as a function of the flat tensors of arguments nested as
    ``spec``.  An object rather than a closure: ``tf.function`` counts
    retracing per code object, and would take the traces of all compiled R
    functions for retracing of one."""

    def __init__(self, fn, spec):
        self._fn = fn
        self._spec = spec

    def __call__(self, *leaves):
        value = self._fn(*unflatten(self._spec, list(leaves)))
        out, spec = flatten(value)
        return _ordered_dicts(unflatten(spec, [_bridge.to_tensor(v) for v in out]))


def _ordered_dicts(tree):
    """Dicts as OrderedDicts, whose key order pytrees keep."""
    if isinstance(tree, dict):
        return collections.OrderedDict((k, _ordered_dicts(v)) for k, v in tree.items())
    if isinstance(tree, (list, tuple)):
        return [_ordered_dicts(t) for t in tree]
    return tree


def _plain_dicts(tree):
    """OrderedDicts (and tuples) back to the dicts and lists R converts."""
    if isinstance(tree, dict):
        return {k: _plain_dicts(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_plain_dicts(t) for t in tree]
    return tree
