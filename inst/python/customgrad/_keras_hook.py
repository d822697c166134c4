"""customgrad's layer class, known to Keras as soon as Keras is imported.

A saved model names its custom-gradient layers' class, and Keras finds a
class only if it is registered (``customgrad.layers`` registers it when
imported).  When R starts Python, :func:`install` arranges for that import
to follow Keras' own, whoever imports Keras (keras3's ``load_model()`` in
a fresh session, say), and keeps R's resolver: the callback that finds the
R function of a loaded layer.  This module imports nothing heavy itself:
it runs before Keras and TensorFlow are loaded.
"""

import importlib
import sys

from customgrad._import_hook import around_import

_resolver = [None]


def resolver():
    """R's callback ``resolve(name, arguments, found)``, or None without R."""
    return _resolver[0]


def _then_register(exec_module, module):
    exec_module(module)
    sys.modules[module.__name__] = module
    importlib.import_module("customgrad.layers")


def install(resolve=None):
    """Register customgrad's layer with Keras now, or when Keras is
    imported; keep ``resolve`` as R's resolver."""
    if resolve is not None:
        _resolver[0] = resolve
    if not around_import("keras", _then_register):
        importlib.import_module("customgrad.layers")
    return True
