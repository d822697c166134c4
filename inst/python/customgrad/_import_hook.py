"""Code run around a module's import, whoever imports it.

:func:`around_import` puts a finder on ``sys.meta_path`` that finds the
module as the path finder does, with a loader that runs the import through
``around(exec_module, module)``.  Several ``around`` functions for one
module share one finder and nest, the first registered innermost: a second
finder would never be asked, as the first one finds the module.  The finder
stays until the import runs: a lookup without import
(``importlib.util.find_spec``) must not use it up.  It imports nothing
heavy: ``_distributed`` installs it when the user asks for a distributed
run (``use_distributed()``), before Keras and its backend are loaded.

The ``around`` functions run inside the import, before reticulate's import
hooks (keras3's among them), which run once the outermost import returns.
"""

import functools
import importlib.abc
import importlib.machinery
import sys


class _AroundImport(importlib.abc.MetaPathFinder):
    def __init__(self, name):
        self.name = name
        self.arounds = []

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_around(module):
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            run = exec_module
            for around in self.arounds:
                run = functools.partial(around, run)
            run(module)

        spec.loader.exec_module = exec_around
        return spec


def around_import(name, around):
    """Run ``name``'s import through ``around(exec_module, module)``, once;
    False if ``name`` is imported already."""
    if name in sys.modules:
        return False
    finder = next(
        (f for f in sys.meta_path if isinstance(f, _AroundImport) and f.name == name),
        None,
    )
    if finder is None:
        finder = _AroundImport(name)
        sys.meta_path.insert(0, finder)
    if around not in finder.arounds:
        finder.arounds.append(around)
    return True
