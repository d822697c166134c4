"""What customgrad does as soon as Keras is imported: its layer class
registered, and what the import made frozen out of Python's collector.

A saved model names its custom-gradient layers' class, and Keras finds a
class only if it is registered (``customgrad.layers`` registers it when
imported).  When R starts Python, :func:`install` arranges for that import
to follow Keras' own, whoever imports Keras (keras3's ``load_model()`` in
a fresh session, say), and keeps R's resolver: the callback that finds the
R function of a loaded layer.  This module imports nothing heavy itself:
it runs before Keras and TensorFlow are loaded.

Right after that import, what Python then holds (the modules, classes and
functions of Keras and its backend, 366,000 objects with PyTorch) goes to
the cyclic collector's permanent generation (``gc.freeze()``).  Every
full collection walked them all, ~190 ms, and R makes full ones frequent:
a tensor R holds outlives Python's young generations until R's own
collector drops it.  Measured from R on PyTorch at n = 1: Python's
collector took ~15 us of each custom-gradient call, ~3 us with the
import frozen.  Everything alive when Keras' import ends is frozen
(anything made before it too); a Keras imported before this hook is
installed is left as it is, and ``options(customgrad.freeze_imports =
FALSE)`` leaves it out.
"""

import importlib
import sys

from customgrad._import_hook import around_import

_resolver = [None]
_freeze = [True]


def resolver():
    """R's callback ``resolve(name, arguments, found)``, or None without R."""
    return _resolver[0]


def _then_register(exec_module, module):
    exec_module(module)
    sys.modules[module.__name__] = module
    importlib.import_module("customgrad.layers")
    if _freeze[0]:
        freeze_imported()


def freeze_imported():
    """Leave what Python holds now out of its cyclic collections."""
    import gc

    gc.collect()  # only live objects go
    gc.freeze()


def install(resolve=None, freeze=True):
    """Register customgrad's layer with Keras now, or when Keras is
    imported; keep ``resolve`` as R's resolver.  ``freeze``: freeze what
    Keras' import made (see above), when this hook sees it."""
    if resolve is not None:
        _resolver[0] = resolve
    _freeze[0] = bool(freeze)
    if not around_import("keras", _then_register):
        importlib.import_module("customgrad.layers")
    return True
