"""Which provider errors are retried, and how long the harness waits (the session-level behaviour,
through litellm and the demo server, is in test_miniswe_runner.py and test_faults.py)."""

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from pytest_predbench.session.miniswe import classify
from pytest_predbench.session.model_settings import import_litellm
from pytest_predbench.session.protocol import StopKind
from pytest_predbench.session.retries import (
    Backoff,
    Retried,
    is_provider_failure,
    is_transient,
    retry_after,
    with_retries,
)

litellm = import_litellm()
E = litellm.exceptions
REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def response(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=REQUEST)


def test_backoff_doubles_with_jitter_up_to_its_cap_and_yields_to_retry_after():
    backoff, rng = Backoff(base_s=1.0, most_s=8.0), random.Random(1)
    for retry, step in enumerate([1.0, 2.0, 4.0, 8.0, 8.0]):
        waits = [backoff.seconds(retry, None, rng) for _ in range(200)]
        assert step / 2 <= min(waits) and max(waits) <= step and len(set(waits)) > 100
    assert backoff.seconds(0, 20.0, rng) == 20.0, "Retry-After above the back-off is honoured"


def test_retry_after_in_seconds_milliseconds_or_as_a_date():
    rate_limited = E.RateLimitError("slow down", "openai", "m", response=response(429, **{"retry-after": "7"}))
    assert retry_after(rate_limited) == 7.0
    millis = E.RateLimitError("x", "openai", "m", response=response(429, **{"retry-after-ms": "1500"}))
    assert retry_after(millis) == 1.5
    now = datetime(2026, 1, 1, tzinfo=UTC)
    dated = response(503, **{"retry-after": format_datetime(now + timedelta(seconds=30), usegmt=True)})
    assert retry_after(E.ServiceUnavailableError("x", "openai", "m", response=dated), now=now) == 30.0
    assert retry_after(E.RateLimitError("x", "openai", "m", response=response(429))) is None
    assert retry_after(ValueError("no response at all")) is None


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (E.RateLimitError("x", "openai", "m", response=response(429)), True),
        (E.InternalServerError("x", "openai", "m", response=response(500)), True),
        (E.ServiceUnavailableError("x", "openai", "m", response=response(503)), True),
        (E.Timeout("x", "m", "openai"), True),
        (E.APIConnectionError("x", "openai", "m", request=REQUEST), True),
        (E.BadRequestError("x", "m", "openai", response=response(400)), False),
        (E.AuthenticationError("x", "openai", "m", response=response(401)), False),
        (E.NotFoundError("x", "m", "openai", response=response(404)), False),
        (E.ContextWindowExceededError("x", "m", "openai", response=response(400)), False),
        (ValueError("not from the provider"), False),
        # the generic rule: any other provider error is transient at a 5xx or with no status at all
        (E.APIError(500, "x", "openai", "m"), True),
        (E.APIError(599, "x", "openai", "m"), True),
        (E.APIError(None, "x", "openai", "m"), True),  # type: ignore[arg-type] - a provider without one
        (E.APIError(499, "x", "openai", "m"), False),
        (E.APIError(418, "x", "openai", "m"), False),
    ],
    ids=lambda value: (
        value if isinstance(value, bool) else f"{type(value).__name__}-{getattr(value, 'status_code', '')}"
    ),
)
def test_only_transient_provider_errors_are_retried(exc, transient):
    assert is_transient(exc, litellm) is transient
    # one classification: what is retried is infrastructure when its retries run out, for the runner too
    if transient:
        assert is_provider_failure(exc, litellm) and classify(exc, litellm).kind is StopKind.INFRA_ERROR


@pytest.mark.parametrize(
    ("exc", "infra"),
    [
        (E.AuthenticationError("x", "openai", "m", response=response(401)), True),
        (E.NotFoundError("x", "m", "openai", response=response(404)), True),
        (E.BadRequestError("x", "m", "openai", response=response(400)), False),
        (E.ContextWindowExceededError("x", "m", "openai", response=response(400)), False),
        (E.APIError(418, "x", "openai", "m"), False),
        (ValueError("not from the provider"), False),
    ],
    ids=lambda value: value if isinstance(value, bool) else f"{type(value).__name__}",
)
def test_a_refusal_is_infrastructure_without_a_retry_and_the_rest_is_the_sessions_outcome(exc, infra):
    assert not is_transient(exc, litellm)
    assert is_provider_failure(exc, litellm) is infra
    assert classify(exc, litellm).kind is (StopKind.INFRA_ERROR if infra else StopKind.ERROR)


class Flaky:
    """A call that fails with `errors` in turn, then answers."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


def retrying(call, retries=3, seconds_left=1000.0, seed="s"):
    slept: list[float] = []
    done = Retried()
    try:
        answer = with_retries(
            call, transient=lambda exc: is_transient(exc, litellm), backoff=Backoff(), rng=random.Random(seed),
            retries=retries, seconds_left=lambda: seconds_left, done=done, sleep=slept.append,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001
        answer = exc
    return answer, done, slept


def test_transient_failures_are_retried_with_the_backoffs_jitter_until_the_call_answers():
    limited = E.RateLimitError("x", "openai", "m", response=response(429, **{"retry-after": "5"}))
    down = E.InternalServerError("x", "openai", "m", response=response(500))
    call = Flaky(limited, down)
    answer, done, slept = retrying(call)
    rng = random.Random("s")  # the same draws the harness's own back-off makes
    assert answer == "answer" and call.calls == 3
    assert slept == [Backoff().seconds(0, 5.0, rng), Backoff().seconds(1, None, rng)] and slept[0] == 5.0
    assert (done.retries, done.waited_s, done.gave_up_after) == (2, round(sum(slept), 3), None)


def test_a_call_is_given_up_after_its_retries_or_when_the_wait_would_outlast_the_session():
    down = [E.InternalServerError("x", "openai", "m", response=response(500)) for _ in range(5)]
    answer, done, slept = retrying(Flaky(*down), retries=2)
    assert answer is down[2] and (done.retries, done.gave_up_after, len(slept)) == (2, 2, 2)
    answer, done, slept = retrying(Flaky(*down[3:]), seconds_left=0.1)  # no time for a wait
    assert answer is down[3] and (done.retries, done.gave_up_after, slept) == (0, 0, [])


def test_a_refusal_is_not_retried():
    refused = E.BadRequestError("x", "m", "openai", response=response(400))
    call = Flaky(refused)
    answer, done, slept = retrying(call)
    assert answer is refused and call.calls == 1 and (done.retries, done.gave_up_after, slept) == (0, None, [])
