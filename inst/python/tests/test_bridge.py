from customgrad import _bridge


def test_dropped_grads_reach_r_at_the_end_of_a_call_only_if_any():
    released = []
    previous = dict(_bridge._grad_runner)
    _bridge.set_grad_runner(previous["run"], released.append)
    try:
        _bridge.take_released()  # none left from other tests
        _bridge.release_to_r()
        assert released == []  # nothing dropped: R is not called
        grads = [_bridge.Grad(7.0), _bridge.Grad(8.0)]
        del grads
        _bridge.release_to_r()
        assert [sorted(handles) for handles in released] == [[7.0, 8.0]]
        assert _bridge.take_released() == []
    finally:
        _bridge.set_grad_runner(previous["run"], previous["release"])


def test_f_result_parts_keeps_what_wraps_no_r_function():
    def grad(upstream):
        return upstream

    assert _bridge.f_result_parts((1, grad)) == [1, grad]
    assert _bridge.f_result_parts((1, 2, 3)) == [1, 2, 3]
