"""The bus's per-message fast paths: the non-recording consume span and the ack-subject parser."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg
from opentelemetry import trace

from colo import telemetry
from colo.subscription import _ack_sequence

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(f"00-{TRACE}-{SPAN}-01", (int(TRACE, 16), int(SPAN, 16), 1), id="sampled"),
        pytest.param(f"00-{TRACE}-{SPAN}-00", (int(TRACE, 16), int(SPAN, 16), 0), id="not-sampled"),
        pytest.param(f" 00-{TRACE}-{SPAN}-01 ", (int(TRACE, 16), int(SPAN, 16), 1), id="padded"),
        pytest.param("", None, id="empty"),
        pytest.param(f"00-{TRACE}-{SPAN}", None, id="no-flags"),
        pytest.param(f"00-{'0' * 32}-{SPAN}-01", None, id="zero-trace"),
        pytest.param(f"00-{TRACE}-{'0' * 16}-01", None, id="zero-span"),
        pytest.param(f"ff-{TRACE}-{SPAN}-01", None, id="version-ff"),
        pytest.param(f"00-{TRACE[:-1]}x-{SPAN}-01", None, id="not-hex"),
    ],
)
def test_parse_traceparent(header: str, expected: tuple[int, int, int] | None) -> None:
    assert telemetry._parse_traceparent(header) == expected


@pytest.mark.parametrize(
    ("headers", "trace_id", "flags"),
    [
        pytest.param({"traceparent": f"00-{TRACE}-{SPAN}-01"}, int(TRACE, 16), 1, id="continues-trace"),
        pytest.param({"traceparent": f"00-{TRACE}-{SPAN}-00"}, int(TRACE, 16), 0, id="keeps-flags"),
        pytest.param({}, None, 1, id="new-trace"),
        pytest.param({"traceparent": "garbage"}, None, 1, id="malformed-new-trace"),
    ],
)
def test_consume_span_propagates(headers: dict[str, str], trace_id: int | None, flags: int) -> None:
    assert not telemetry.exporting()
    before = trace.get_current_span().get_span_context()
    with telemetry.consume_span("consume x", headers):
        ctx = trace.get_current_span().get_span_context()
        out = telemetry.inject({})
    assert ctx.is_valid
    if trace_id is not None:
        assert ctx.trace_id == trace_id
        assert ctx.span_id != int(SPAN, 16)
    assert int(ctx.trace_flags) == flags
    assert out["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{flags:02x}"
    assert trace.get_current_span().get_span_context() == before  # detached on exit


def test_consume_span_detaches_on_error() -> None:
    before = trace.get_current_span().get_span_context()
    with pytest.raises(RuntimeError), telemetry.consume_span("consume x", {}):
        raise RuntimeError("handler failed")
    assert trace.get_current_span().get_span_context() == before


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param("$JS.ACK.POD.colo-x.3.1234.56.1700000000000000000.2", (1234, 3), id="v1"),
        pytest.param("$JS.ACK.dom.ACC.POD.colo-x.2.99.56.1700000000000000000.0.tok", (99, 2), id="v2"),
        pytest.param("", (0, 1), id="no-reply"),
        pytest.param("_INBOX.abc", (0, 1), id="core-inbox"),
        pytest.param("$JS.ACK.POD.colo-x.x.y.56.17.2", (0, 1), id="not-numbers"),
    ],
)
def test_ack_sequence(reply: str, expected: tuple[int, int]) -> None:
    msg = Msg(_client=None, subject="colo.v1.pod.submitted", reply=reply, data=b"")  # type: ignore[arg-type]
    assert _ack_sequence(msg) == expected
