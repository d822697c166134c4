"""Nested inputs and outputs: flatten to leaves and pack them back.

R lists reach Python as lists (dicts when named); the backends want flat
tensors.  A spec records the nesting so that upstream gradients and input
gradients can be given back to R with the structure the user wrote.

An argument that is not a tensor (``NULL``, a string, an integer option)
stays in R; Python gets a :class:`Static` marker with a key for its value.
A marker is part of the spec, not a leaf: it takes no tensor, its key is
part of the spec's key (a trace is made per value), and packing puts it
back where it was, for R to replace with the value.  An argument of
``f`` that the call did not pass has the marker :data:`MISSING`: it keeps
the places of the arguments after it, and ``f`` uses its default.

Why not ``keras.tree`` (which the rest of the module uses for outputs): it
makes a marker a leaf, gives no hashable key for the trace cache, and has
no spec to write into a saved model's traces (``_saving.py``), which older
files must still load from.
"""

import keras


class Static:
    """A non-tensor argument kept in R, known here by its value's key."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = str(key)

    def __repr__(self):
        return f"Static({self.key!r})"


class Spec:
    """The shape of a nested structure: a leaf, or a container of specs."""

    __slots__ = ("kind", "children", "key")

    def __init__(self, kind, children=None):
        self.kind = kind
        self.children = children
        # Hashable, equal for equal nestings (a trace is made per nesting).
        if kind is None:
            self.key = None
        elif kind is Static:
            self.key = ("static", children)
        elif kind is dict:
            self.key = ("dict", tuple((k, c.key) for k, c in children.items()))
        else:
            self.key = (kind.__name__, tuple(c.key for c in children))

    @property
    def is_leaf(self):
        return self.kind is None

    def num_leaves(self):
        if self.is_leaf:
            return 1
        if self.kind is Static:
            return 0
        return sum(child.num_leaves() for child in self._child_specs())

    def _child_specs(self):
        if self.kind is dict:
            return list(self.children.values())
        return self.children

    def same_as(self, other):
        if self.kind is None or other.kind is None:
            return self.kind is other.kind
        if self.kind is Static or other.kind is Static:
            return self.key == other.key
        if (self.kind is dict) != (other.kind is dict):
            return False
        if self.kind is dict:
            if list(self.children) != list(other.children):
                return False
        elif len(self.children) != len(other.children):
            return False
        return all(
            a.same_as(b) for a, b in zip(self._child_specs(), other._child_specs())
        )


LEAF = Spec(None)

# The key of an argument the call did not pass (R's keys are hashes).
MISSING = "missing"


def any_symbolic(tree):
    """Whether a nest (lists, tuples, dicts) holds a Keras symbolic tensor,
    as Keras decides when it records a call: a walk without Keras' general
    ``tree.flatten``, which costs more than a small eager op on every
    call from R."""
    if isinstance(tree, (list, tuple)):
        return any(any_symbolic(v) for v in tree)
    if isinstance(tree, dict):
        return any(any_symbolic(v) for v in tree.values())
    return isinstance(tree, keras.KerasTensor)


def is_missing(x):
    """Whether ``x`` marks an argument that the call did not pass."""
    return isinstance(x, Static) and x.key == MISSING


def flatten(tree):
    """Return ``(leaves, spec)`` for a nest of lists, tuples and dicts."""
    leaves = []
    spec = _flatten_into(tree, leaves)
    return leaves, spec


def _flatten_into(tree, leaves):
    if isinstance(tree, Static):
        return Spec(Static, tree.key)
    if isinstance(tree, (list, tuple)):
        return Spec(type(tree), [_flatten_into(t, leaves) for t in tree])
    if isinstance(tree, dict):
        return Spec(dict, {k: _flatten_into(v, leaves) for k, v in tree.items()})
    leaves.append(tree)
    return LEAF


def unflatten(spec, leaves):
    """Inverse of :func:`flatten`: put ``leaves`` back into ``spec``'s nest."""
    it = iter(leaves)
    return _build(spec, it)


def _build(spec, it):
    if spec.is_leaf:
        return next(it)
    if spec.kind is Static:
        return Static(spec.children)
    if spec.kind is dict:
        return {k: _build(s, it) for k, s in spec.children.items()}
    return list(_build(s, it) for s in spec.children)
