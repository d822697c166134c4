"""The named records between R and Python."""

import pytest

from customgrad import _messages
from customgrad.errors import CustomGradError


def test_a_forward_reply_is_read_by_name():
    reply = _messages.read_forward_reply({"grad": 7, "value": "v"})
    assert reply.value == "v"
    assert reply.grad == 7


@pytest.mark.parametrize("bad", [["v", 7], {"value": "v"}, {"value": 1, "grad": 2, "x": 3}])
def test_anything_else_is_refused(bad):
    with pytest.raises(CustomGradError, match="forward_reply"):
        _messages.read_forward_reply(bad)


def test_python_replies_name_their_fields():
    assert _messages.value_and_grad_reply(1, 2) == {"value": 1, "grad": 2}
    assert _messages.gradcheck_reply(1, 2, 3) == {"analytic": 1, "numeric": 2, "shapes": 3}
