"""Transport settings that would refuse every request or session (a limit of 0, a negative, NaN or infinite
duration) are refused when the server is declared, naming the setting, as `max_inflight_per_session` was."""

from __future__ import annotations

import math

import pytest

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.settings import TransportSettings

LIMITS = ("max_body_bytes", "max_sessions", "max_sessions_per_principal", "max_sessions_per_tenant",
          "max_subscriptions", "max_uri_length")
DURATIONS = ("session_idle_timeout", "sse_ping_seconds", "request_state_ttl", "client_request_timeout",
             "reply_store_timeout")


@pytest.mark.parametrize("name", LIMITS)
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_a_limit_is_a_whole_number_above_zero(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a whole number above 0"):
        MCPFusion("x", tools=[Tool("t")], **{name: value})


@pytest.mark.parametrize("name", DURATIONS)
@pytest.mark.parametrize("value", [0, -5, math.nan, math.inf, True, "30"])
def test_a_duration_is_a_finite_number_of_seconds_above_zero(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a finite number of seconds above 0"):
        TransportSettings(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "value"), [("sse_hold_seconds", -0.1), ("sse_hold_seconds", math.nan),
                                             ("sse_retry_ms", -1), ("cache_ttl_ms", -1), ("cache_ttl_ms", 0.5)])
def test_settings_that_may_be_zero_still_refuse_what_cannot_be(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a"):
        TransportSettings(**{name: value})  # type: ignore[arg-type]


def test_sensible_values_and_the_zeros_that_mean_something_are_kept() -> None:
    settings = TransportSettings(sse_hold_seconds=0, sse_retry_ms=None, cache_ttl_ms=0, max_body_bytes=2048,
                                 session_idle_timeout=0.5, max_sessions=1)
    assert (settings.sse_hold_seconds, settings.sse_retry_ms, settings.cache_ttl_ms) == (0, None, 0)
    assert (settings.max_body_bytes, settings.session_idle_timeout, settings.max_sessions) == (2048, 0.5, 1)
    assert TransportSettings(sse_retry_ms=0).sse_retry_ms == 0
