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
import importlib.abc
import importlib.machinery
import sys

_resolver = [None]


def resolver():
    """R's callback ``resolve(name, arguments, found)``, or None without R."""
    return _resolver[0]


class _AfterKeras(importlib.abc.MetaPathFinder):
    """Finds ``keras`` as the path finder does, with a loader that imports
    ``customgrad.layers`` once Keras has finished importing."""

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            exec_module(module)
            sys.modules[name] = module
            importlib.import_module("customgrad.layers")

        spec.loader.exec_module = exec_then_register
        return spec


def install(resolve=None):
    """Register customgrad's layer with Keras now, or when Keras is
    imported; keep ``resolve`` as R's resolver."""
    if resolve is not None:
        _resolver[0] = resolve
    if "keras" in sys.modules:
        importlib.import_module("customgrad.layers")
        return True
    if not any(isinstance(f, _AfterKeras) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterKeras())
    return True
