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
