"""The active backend's adapter module, chosen once.

Each adapter (``_tensorflow``, ``_jax``, ``_torch``) implements the same
interface, and nothing else in the package asks which backend is active:

* ``custom_gradient(fn)``: a differentiable callable over ``fn.forward``
  (see ``_trace``); ``FILL_NONE``: whether a missing gradient must be
  zeros; ``finish(call)``: what the backend needs around a callable.
* ``vjp(flat_fn, xs, make_upstream)``: values and vector-Jacobian product
  (``make_upstream`` None: ones, for a one-element value).
* ``compile(fn)``: the backend's tracing compiler, or the function itself
  where there is none; ``COMPILES_GRADIENT_REPLAYS``: whether a gradient of
  a traced R function, called eagerly from R, runs compiled.
* ``no_grad()``: a context without autograd recording.
* ``GRAD_GETS_VARIABLES``: whether the backend hands ``grad`` the
  variables ``f`` read (TensorFlow's ``variables=``).
* ``enable_float64()`` / ``restore_float64(previous)``: float64 compute.
* ``forward_history()`` (PyTorch only; optional): the context R's ``f``
  runs in when it runs at a call (see ``_trace.RCalls``).
* ``symbolic_run()`` (JAX only; optional): the context R runs in while
  it is traced on Keras symbolic tensors (see ``_trace``).
* ``on_main_thread(fn)`` (TensorFlow only; optional): ``fn()`` run on the
  main thread when called from a strategy's replica thread (``_trace``).
* ``nbytes(x)``: the bytes of a concrete tensor (0 for anything else);
  ``device_memory_in_use()``: a reader of the bytes the backend's
  allocator holds on its default device, or None where it has none.
* ``batching(flat)``: the batching transform the inputs are under (where
  R can't run), or None.
"""

import importlib

import keras

from customgrad.errors import BackendError

_ADAPTERS = {
    "tensorflow": "customgrad._tensorflow",
    "jax": "customgrad._jax",
    "torch": "customgrad._torch",
}
_chosen = {}


def adapter(backend=None):
    """The adapter module of ``backend`` (default: Keras' active backend)."""
    backend = backend or keras.config.backend()
    module = _chosen.get(backend)
    if module is None:
        if backend not in _ADAPTERS:
            raise BackendError(backend=backend)
        module = _chosen[backend] = importlib.import_module(_ADAPTERS[backend])
    return module
