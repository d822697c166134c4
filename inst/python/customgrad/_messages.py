"""The records R and Python hand each other, by name.

R builds the one record it sends (``R/messages.R`` mirrors it); Python's
replies are dicts, which reach R as named lists.  No record is a positional
list: a name says what each field is, and a wrong record fails by name.
"""

from typing import Any, NamedTuple

from customgrad.errors import ProtocolError


class ForwardReply(NamedTuple):
    """R's reply to a forward call: ``f``'s ``value`` (a nest of tensors)
    and ``grad``, the handle of R's gradient function (a Python stand-in
    for R may give a callable)."""

    value: Any
    grad: Any


class TraceFailed(Exception):
    """R replied that ``f`` or ``grad`` can't be traced (the reason is the
    message); Python then calls R at every call for that signature."""


# R's reply, while tracing, when f or grad did something a trace can't
# hold; named so that it can't be taken for a gradient.
TRACE_FAILED = "customgrad_trace_failed"


def check_trace_failed(reply):
    """Raise :class:`TraceFailed` if ``reply`` is R's trace-failed record;
    return ``reply`` otherwise."""
    if isinstance(reply, dict) and TRACE_FAILED in reply:
        raise TraceFailed(str(reply[TRACE_FAILED]))
    return reply


def read_forward_reply(reply):
    """A :class:`ForwardReply` from R's ``forward_reply()`` (a dict)."""
    check_trace_failed(reply)
    if not isinstance(reply, dict) or set(reply) != set(ForwardReply._fields):
        raise ProtocolError(
            problem="R's forward callback must reply forward_reply(value, grad)."
        )
    return ForwardReply(reply["value"], reply["grad"])


def value_and_grad_reply(value, grad):
    """The reply of ``value_and_grad``: ``f``'s value and the gradients,
    one per argument differentiated."""
    return {"value": value, "grad": grad}


def gradcheck_reply(analytic, numeric, shapes):
    """The reply of ``gradcheck``: per leaf tensor, the autodiff gradient and
    the finite-difference one (flat float64, C order) and the leaf's shape."""
    return {"analytic": analytic, "numeric": numeric, "shapes": shapes}
