import threading

import pytest

from customgrad import _serving
from customgrad.errors import ThreadError


def test_serve_runs_callbacks_of_other_threads_on_the_main_thread():
    seen = []

    def on_main(value):
        seen.append(threading.current_thread() is threading.main_thread())
        return value * 2

    def work():
        assert threading.current_thread() is not threading.main_thread()
        return [_serving.on_main(on_main, v) for v in range(3)]

    assert _serving.serve(work) == [0, 2, 4]
    assert seen == [True, True, True]


def test_an_error_in_a_served_call_reaches_the_caller():
    def work():
        raise ValueError("in the worker")

    with pytest.raises(ValueError, match="in the worker"):
        _serving.serve(work)


def test_a_call_handed_over_with_no_one_serving_is_refused_at_once():
    out = []

    def work():
        try:
            _serving.on_main(lambda: None)
        except ThreadError as exc:
            out.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert out and out[0].details["thread"] == thread.name


def test_keyword_arguments_and_errors_cross_with_the_call():
    def on_main(value, scale=1):
        if value < 0:
            raise KeyError("negative")
        return value * scale

    def work():
        with pytest.raises(KeyError, match="negative"):
            _serving.on_main(on_main, -1)
        return _serving.on_main(on_main, 3, scale=2)

    assert _serving.serve(work) == 6
    assert not _serving.is_serving()


def test_serve_keeps_its_thread_for_the_next_call_and_nests_on_another():
    def name_and_id():
        return threading.get_ident()

    first = _serving.serve(name_and_id)
    assert _serving.serve(name_and_id) == first

    def nested():
        # R calling a served function from a request: a second worker.
        return threading.get_ident(), _serving.on_main(_serving.serve, name_and_id)

    outer, inner = _serving.serve(nested)
    assert outer == first and inner != first
    # Both are idle again, and reused.
    assert {_serving.serve(name_and_id), _serving.serve(nested)[1]} <= {first, inner}


@pytest.mark.backend("tensorflow")
def test_served_tensorflow_functions_leave_no_per_thread_state():
    import gc

    import tensorflow as tf

    f = tf.function(lambda x: x * 2)
    x = tf.constant(1.0)

    def options():
        gc.collect()
        return sum(type(o).__name__ == "FunctionCallOptions" for o in gc.get_objects())

    _serving.serve(f, x)
    before = options()
    for _ in range(50):
        _serving.serve(f, x)
    # A thread per call kept one each (TensorFlow's per-thread context).
    assert options() - before == 0
