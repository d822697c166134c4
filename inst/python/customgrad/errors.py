"""Exceptions that the R side turns into classed R conditions.

An error of customgrad's own carries its facts, not prose: the R
condition class it becomes (``r_class``, also a base class, so that any
call that returns it to R gives it that class) and named ``details`` (numbers,
shapes, names). Each message has one writer. R writes it from those
(``R/python-error-messages.R``), with cli bullets and the user's call, and
``str()`` is the class and the facts; except for errors met where R may
not be, loading a saved model (:class:`WrittenInPython`), whose message
Python writes, as bullets that R shows as they are.

An R error raised in an R callback reaches Python as an exception that
reticulate made from the condition (``r_class`` and the fields attached);
the R side finds either kind in an exception's cause/context chain with
:func:`find_error` and signals the R condition again.
"""

import collections
import itertools
import re
import sys


_r_class_bases = {}


def r_class_base(name):
    """A base class that only names the R class ``name``: reticulate writes
    the class of an exception whose ``__module__`` is empty as its bare
    name, so an exception with this base reaches R with ``name`` among its
    R classes, through anyone's call (keras3's ``load_model()``, Keras'
    ``fit()``), not only through customgrad's."""
    base = _r_class_bases.get(name)
    if base is None:
        base = _r_class_bases[name] = type(name, (), {"__module__": ""})
    return base


class CustomGradError(Exception, r_class_base("customgrad_error")):
    """Base class. Subclasses name their R class with a base
    (``r_class_base()``), also their ``r_class``."""

    r_class = "customgrad_error"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for base in cls.__bases__:
            if base.__module__ == "":
                cls.r_class = base.__name__

    def __init__(self, message=None, **details):
        if message is not None:
            # Keras re-raises an error from a layer's call as the same class
            # with its own message (the original is the context): no details.
            self.details = None
            super().__init__(message)
            return
        self.details = details
        super().__init__(self.describe())

    def describe(self):
        """``str()``: the R class and the facts (R writes the message)."""
        facts = ", ".join(f"{k}={v!r}" for k, v in self.details.items())
        return f"{self.r_class}: {facts}"


class WrittenInPython(CustomGradError):
    """An error met where R may not be (a saved model loaded in Python):
    Python writes its message, as :meth:`bullets`, which R shows as they
    are, and ``str()`` joins them."""

    def bullets(self):
        """``[(mark, text)]``: mark "" for the headline, "x" for what is
        wrong, "i" for what to do (cli's bullets in R)."""
        raise NotImplementedError

    def describe(self):
        return "\n".join(f"{mark} {text}" if mark else text for mark, text in self.bullets())


class GradientCountError(CustomGradError, r_class_base("customgrad_error_grad_count")):
    """``expected`` counts the arguments passed, ``tensors`` the tensor
    inputs among them: either count is accepted."""


class GradientShapeError(CustomGradError, r_class_base("customgrad_error_grad_shape")):
    """A gradient whose shape is not its input's (``where``, ``grad_shape``, ``input_shape``)."""


class GradientDtypeError(CustomGradError, r_class_base("customgrad_error_grad_dtype")):
    """A gradient whose dtype is not floating point (``where``, ``dtype``, ``input_dtype``)."""


class GradientStructureError(CustomGradError, r_class_base("customgrad_error_grad_structure")):
    """``problem`` is "static" (a non-tensor input got a gradient) or
    "nesting" (the gradient is nested unlike its input)."""


class ForeignTensorError(CustomGradError, r_class_base("customgrad_error_input")):
    """A tensor of another framework than the backend's (``framework``, ``tensor``, ``backend``)."""


class VariablesError(CustomGradError, r_class_base("customgrad_error_grad_variables")):
    """``grad`` returned ``returned`` variable gradients for ``expected`` variables."""


class ThreadError(CustomGradError, r_class_base("customgrad_error_thread")):
    """A function that needs R called on the Python thread ``thread``."""


class HostValueError(CustomGradError, r_class_base("customgrad_error_value_like")):
    """An R host op's value (``_host``): ``problem`` is "missing" (no
    ``value_like`` where one is needed), "not_tensor" (``value_like`` gave
    no tensor), "shape", "dtype" or "nesting" (R's value is not as
    declared), or "lost" (its ``grad`` was dropped before its backward)."""


class TraceError(CustomGradError, r_class_base("customgrad_error_trace")):
    """A trace failed in strict mode (``op_custom_gradient(trace = "strict")``)."""


class TransformError(CustomGradError, r_class_base("customgrad_error_transform")):
    """A transform that can't honour the custom gradient: ``kind`` is
    "forward" (a Jacobian-vector product; ``reverse`` names the backend's
    reverse mode), "pfor" (TensorFlow's vectorized_map) or "untraced" (a
    function R runs at every call, under a batching ``transform``)."""


class RecursionLimitError(CustomGradError, r_class_base("customgrad_error_recursion")):
    """Custom-gradient functions nested ``depth`` levels deep (a function
    that calls itself without end), past ``limit``."""


class NotScalarError(CustomGradError, r_class_base("customgrad_error_not_scalar")):
    """``f`` returned tensors of ``shapes``, not a scalar, with no ``upstream``."""


class UpstreamError(CustomGradError, r_class_base("customgrad_error_upstream")):
    """``problem`` is "nesting" or "shape"."""


class DtypeError(CustomGradError, r_class_base("customgrad_error_wrt_dtype")):
    """A gradient asked for argument ``argument``, of the non-float ``dtype``."""


class BackendError(CustomGradError, r_class_base("customgrad_error_backend_unsupported")):
    """The Keras backend ``backend`` is not one customgrad supports."""


class WeightsLostError(CustomGradError, r_class_base("customgrad_error_weights_lost")):
    """A served model used again after a failed JAX step consumed its weights."""


class GradcheckError(CustomGradError, r_class_base("customgrad_error_gradcheck_structure")):
    """``f`` returned ``returned`` tensors for perturbed inputs and ``expected`` at first."""


def _load_hint(name):
    """How to pass the function ``name`` when loading, in R and in Python."""
    return (
        f"in R `load_model(path, custom_objects = list({name} = <function>))` "
        f'or `register_keras_serializable({name}, name = "{name}")` once, '
        f"in Python `custom_objects={{{name!r}: <function>}}`"
    )


class _LoadError(WrittenInPython):
    """An error loading a saved custom-gradient layer; ``function`` is the
    name its function was saved by, or None."""

    def __init__(self, message=None, function=None, **details):
        super().__init__(message, function=function, **details)


class FunctionNotFoundError(_LoadError, r_class_base("customgrad_error_load_function")):
    """A loaded custom-gradient layer needs its function (``function``: its
    saved name, or None): none was supplied and the saved traces can't
    serve the call (``reason`` is "no_traces" or "new_signature")."""

    _problems = {
        "no_traces": "It was saved without traces that run without it.",
        "new_signature": "Its saved traces don't serve inputs of this shape or dtype.",
    }

    def bullets(self):
        d = self.details
        name = d["function"]
        named = "" if name is None else f" `{name}`"
        if name is None:
            how = (
                "It was made from a function without a name, which loading can't "
                "find: assign the function to a variable, make the layer with that "
                "variable, and save the model again."
            )
        else:
            how = f"Pass the function when loading the model: {_load_hint(name)}."
        return [
            ("", f'The custom-gradient layer "{d["layer"]}" needs its function{named}.'),
            ("x", self._problems[d["reason"]]),
            ("i", how),
        ]


class SavedFormatError(_LoadError, r_class_base("customgrad_error_load_format")):
    """A loaded custom-gradient layer runs on its saved traces, and they
    have a format this customgrad doesn't read (see ``_saving.FORMAT``):
    ``reason`` is "newer" (a newer customgrad saved them), "older" (an
    older customgrad than this one reads) or "unknown" (no format number
    customgrad writes); ``oldest`` and ``newest`` are the formats read."""

    _problems = {
        "newer": "was saved by a newer customgrad",
        "older": "was saved by an older customgrad",
        "unknown": "has saved traces of an unknown format",
    }
    _hows = {
        "newer": "Upgrade customgrad to load it",
        "older": "Load it with the customgrad version that saved it",
        "unknown": "Save the model again where it was made",
    }

    def bullets(self):
        d = self.details
        oldest, newest = d["oldest"], d["newest"]
        reads = f"format {newest}" if oldest == newest else f"formats {oldest} to {newest}"
        how = self._hows[d["reason"]]
        if d["function"] is not None:
            how += ", or pass its function when loading"
            if d["reason"] == "older":
                how += " and save the model again with this customgrad"
            how += ": " + _load_hint(d["function"])
        return [
            ("", f'The custom-gradient layer "{d["layer"]}" {self._problems[d["reason"]]}.'),
            ("x", f"Its traces have format {d['format']!r}; this customgrad reads {reads}."),
            ("i", how + "."),
        ]


class NotSerializableError(CustomGradError, r_class_base("customgrad_error_not_serializable")):
    """Keras was about to save a custom-gradient function made in R by a
    name that loading can't find (a ``Lambda`` layer's function): ``layer``
    names that layer, or is None."""

    def __init__(self, message=None, layer=None, **details):
        super().__init__(message, layer=layer, **details)


class ProtocolError(CustomGradError, r_class_base("customgrad_error_internal")):
    """R and Python disagree about a message between them: a customgrad bug."""


class Raised:
    """An exception that a call from R raised, returned to R instead:
    R raises it again with :meth:`again` inside its error handler, so that
    the call itself, made at every eager step, needs no handler (R's
    ``withCallingHandlers()`` costs 3-4 us a call)."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error

    def again(self):
        error, self.error = self.error, None
        raise error


class RConditionError(Exception):
    """An R condition with classes of its own (``rlang::abort(class = )``)
    raised in an R callback, on its way through Python code that is not
    customgrad's (Keras' ``fit()``, a layer's call).  Its subclasses have
    the R classes as bases (``r_class_base()``): a Python exception reaches
    R with the classes of its type only.  The exception reticulate made
    from the condition is its cause, which :func:`find_error` returns."""


_noted_r_classes = [None]
_noted_stop = [False]
_r_condition_types = {}


def note_r_condition(classes):
    """R's error handler in its callbacks notes the classes of the error
    they are about to raise (see ``_bridge.call_r``)."""
    # R's character vector of one is a Python string.
    _noted_r_classes[0] = (classes,) if isinstance(classes, str) else tuple(classes)


def r_condition_type(classes):
    """The :class:`RConditionError` subclass for R ``classes``, made once."""
    cls = _r_condition_types.get(classes)
    if cls is None:
        # Named as the R condition's first class, with an empty module, so
        # that its first R class is that one too (`class(e)[1]`), not this
        # module's; reticulate's methods (before R's classes that follow)
        # still read it as the Python exception it is.
        cls = type(
            classes[0],
            (RConditionError, *(r_class_base(c) for c in classes[1:])),
            {"__module__": "", "__doc__": "An R condition of these classes."},
        )
        _r_condition_types[classes] = cls
    return cls


def r_classes_of(exc):
    """The R classes the Python type of ``exc`` carries
    (:func:`r_class_base`), generic R classes left out."""
    classes = [type(exc).__name__] if type(exc).__module__ == "" else []
    classes += [
        c.__name__
        for c in type(exc).__mro__[1:]
        if c.__module__ == "" and c is not object
    ]
    generic = {"rlang_error", "simpleError", "error", "condition"}
    return tuple(dict.fromkeys(c for c in classes if c not in generic))


def carried_r_condition(exc, classes):
    """reticulate's exception for an R condition (``exc``, which carries
    its fields and ``r_class``), remade as the :func:`r_condition_type` of
    its own ``classes``: an R condition leaving an R function that anyone
    calls from Python (keras3's ``op_map()``, a ``layer_lambda()``) then
    reaches R with its classes, through code that is not customgrad's,
    TensorFlow's re-raise of the same type included."""
    classes = (classes,) if isinstance(classes, str) else tuple(classes)
    carried = r_condition_type(classes)(*exc.args)
    carried.__dict__.update(exc.__dict__)
    return carried


def note_stop():
    """R's error handler in its callbacks notes that the error in flight is
    a time limit: it stops the user's call (see ``_bridge.call_r``)."""
    _noted_stop[0] = True


def take_noted_stop():
    """Whether R noted the error in flight as a time limit, once."""
    stop, _noted_stop[0] = _noted_stop[0], False
    return stop


def take_noted_r_classes():
    """The classes R noted for the error in flight, once."""
    classes, _noted_r_classes[0] = _noted_r_classes[0], None
    return classes


def carries_r_condition(exc):
    """Whether ``exc`` is an R condition that reticulate turned into a Python
    exception (it sets ``r_class`` and one attribute per field)."""
    return not isinstance(exc, CustomGradError) and hasattr(exc, "r_class")


# Failures inside host callbacks (``_host``), kept by number until the
# backend's error that reports them reaches find_error(); only the newest
# few.
_host_failures = collections.OrderedDict()
_MAX_HOST_FAILURES = 16
_HOST_FAILURE = "customgrad host failure #{}"
_HOST_FAILURE_MARKED = re.compile(r"customgrad host failure #(\d+)")
_host_failure_numbers = itertools.count(1)
# A callback's traceback, as a backend's runtime error reports it, that
# ends in an interrupt.
_CALLBACK_INTERRUPTED = re.compile(
    r"Traceback \(most recent call last\):.*^KeyboardInterrupt\b", re.M | re.S
)


class HostFailure(Exception):
    """What a host callback raises into the backend: the failure's number."""


def mark_host_failure(exc):
    """The :class:`HostFailure` a host callback raises for ``exc``, which
    is kept for :func:`recover_host_failure`."""
    number = next(_host_failure_numbers)
    _host_failures[number] = exc
    while len(_host_failures) > _MAX_HOST_FAILURES:
        _host_failures.popitem(last=False)
    # The error's own message too: where the backend's error reaches the
    # user through code that is not customgrad's (Keras' compiled fit() on
    # JAX), its text is all they see.
    message = str(exc).strip().splitlines()
    return HostFailure(
        _HOST_FAILURE.format(number) + (": " + message[0] if message else "")
    )


def recover_host_failure(exc):
    """The failure a backend's error ``exc`` reports from a host callback
    (the exception raised there), or None."""
    found = _HOST_FAILURE_MARKED.search(str(exc))
    if found is None:
        return None
    return _host_failures.get(int(found.group(1)))


def raise_host_stop(exc):
    """Raises the interrupt (Esc / Ctrl+C in R) that stopped a host
    callback, where the backend's error ``exc`` reports it (JAX's
    ``XlaRuntimeError``): it goes on to R as an interrupt, not as the
    backend's error. Returns where it reports none."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        found = recover_host_failure(exc)
        if isinstance(found, KeyboardInterrupt):
            raise found.with_traceback(None) from None
        if found is None and _CALLBACK_INTERRUPTED.search(str(exc)):
            # The interrupt reached Python in the backend's own callback
            # code, around customgrad's (JAX's pure_callback turning the
            # result into an array): nothing of ours to mark, only the
            # traceback the runtime reports as text.
            raise KeyboardInterrupt from None
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def find_error(exc):
    """Return the first exception in ``exc``'s chain that the R side turns
    back into an R condition (a customgrad error, or an R condition that
    reticulate carried through Python), or None."""
    seen = set()
    rewrapped = None
    while exc is not None and id(exc) not in seen:
        if "customgrad host failure #" in str(exc):
            # A host callback's failure, reported in the backend's own error.
            found = recover_host_failure(exc)
            if found is not None and found is not exc:
                return find_error(found) or rewrapped
        if carries_r_condition(exc):
            return exc
        if isinstance(exc, CustomGradError):
            if exc.details is not None:
                return exc
            rewrapped = rewrapped or exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return rewrapped


def has_r_class(exc, *names):
    """Whether ``exc`` or an exception in its chain has one of the R
    classes ``names``, raised in Python or in R: either has its R classes
    among its type's bases (see :func:`r_class_base`), R's through
    ``_bridge.call_r``."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if any(c.__name__ in names for c in type(exc).__mro__):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def is_recursion(exc):
    """Whether ``exc`` is customgrad's recursion error (see :func:`has_r_class`)."""
    return has_r_class(exc, RecursionLimitError.r_class)


def reason_of(exc):
    """The message of an exception from R (the R condition's) or Python."""
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        return message
    text = str(exc)
    return text.strip() or type(exc).__name__


def r_condition_fields(exc):
    """The fields of the R condition that ``exc`` carries, by name (Python's
    own attributes, such as the ``__notes__`` JAX adds, left out)."""
    return {
        k: v for k, v in vars(exc).items() if k != "r_class" and not k.startswith("__")
    }


def error_classes():
    """The R class of every error customgrad's Python module raises."""
    found, todo = [], [CustomGradError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.r_class != CustomGradError.r_class:  # not a base (WrittenInPython)
            found.append(cls.r_class)
    return sorted(found)


class DistributedStartedError(CustomGradError, r_class_base("customgrad_error_distributed_started")):
    """The backend started before :func:`_distributed.arrange` could
    arrange its processes or devices."""


def called_from_python():
    """Whether R, which calls this, runs inside a call from Python: then the
    Python code that called R is below this function's frame. A call that R
    makes from its top level starts with no Python frame."""
    return sys._getframe().f_back is not None


def keras_op_of(exc):
    """The name of the function in ``keras/src/ops`` whose code raised
    ``exc``: the outermost such frame of its traceback (``scan`` for
    ``keras.ops.scan()`` failing in ``Scan.compute_output_spec``), or None."""
    tb = getattr(exc, "__traceback__", None)
    while tb is not None:
        code = tb.tb_frame.f_code
        if "/keras/src/ops/" in code.co_filename.replace("\\", "/"):
            return code.co_name
        tb = tb.tb_next
    return None
