"""Retrying one model call after a transient provider error, inside the session.

Real providers rate-limit routinely and fail now and then with a 5xx, a timeout or a dropped
connection. Ending the session on the first such error throws away what it spent and runs it
again from scratch; so a call is retried, with exponential back-off and jitter, honouring the
provider's Retry-After, as long as the session's wall time allows. Only a call whose retries are
exhausted (or would outlast the session) ends it as an infrastructure failure.

What is transient is decided by litellm's exception classes (passed in: this module does not
import litellm); a refusal that would be refused again (400, 401, 403, 404, a context window
exceeded) is never retried. The loop itself is tenacity's (`with_retries`); the decisions — what is
transient, how long to wait, when to give up — are predbench's, passed to it. This is the one
classification of provider errors: the runner's stop reason (session/miniswe.py) asks
`is_provider_failure` whether a session's end was infrastructure.
"""

import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from pydantic import BaseModel

TRANSIENT_EXCEPTIONS = (
    "RateLimitError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError",
    "APIConnectionError", "Timeout",
)  # fmt: skip
"""litellm exceptions worth another attempt: the same request may well succeed a moment later."""
REFUSED_EXCEPTIONS = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "APIResponseValidationError")
"""litellm exceptions that are the provider's failure (a key, an endpoint, an answer it cannot parse),
not the model's, but that another attempt would meet again: infrastructure, never retried."""


def _classes(litellm: Any, names: tuple[str, ...]) -> tuple[type, ...]:
    return tuple(getattr(litellm.exceptions, n) for n in names if hasattr(litellm.exceptions, n))


class Backoff(BaseModel):
    """How long to wait before retry number n (0-based): base · 2^n, at most `most`, with jitter
    (a uniform draw from its upper half), and never less than the provider's Retry-After."""

    base_s: float = 1.0
    most_s: float = 30.0

    def seconds(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        step = min(self.most_s, self.base_s * 2**retry)
        return max(retry_after or 0.0, step * rng.uniform(0.5, 1.0))


def is_transient(exc: BaseException, litellm: Any) -> bool:
    """Whether `exc` (raised by litellm.completion) is a transient provider failure: a class of
    TRANSIENT_EXCEPTIONS, or any other provider error the server answered with a 5xx or no status."""
    if isinstance(exc, _classes(litellm, TRANSIENT_EXCEPTIONS)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(exc, litellm.exceptions.APIError) and (not isinstance(status, int) or status >= 500)


def is_provider_failure(exc: BaseException, litellm: Any) -> bool:
    """Whether `exc` ends a session as an infrastructure failure (not a result of the model): a
    transient failure whose retries ran out, or one of REFUSED_EXCEPTIONS."""
    return is_transient(exc, litellm) or isinstance(exc, _classes(litellm, REFUSED_EXCEPTIONS))


def _headers(exc: BaseException) -> Any:
    for holder in (exc, getattr(exc, "response", None)):
        headers = getattr(holder, "litellm_response_headers", None) or getattr(holder, "headers", None)
        if headers is not None and hasattr(headers, "get"):
            return headers
    return None


def retry_after(exc: BaseException, now: datetime | None = None) -> float | None:
    """The provider's Retry-After (or retry-after-ms), in seconds; None when it gave none."""
    headers = _headers(exc)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:  # an HTTP date
            when = parsedate_to_datetime(str(value))
            return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    except (TypeError, ValueError, OverflowError):
        return None


T = TypeVar("T")


class Retried(BaseModel):
    """What the retries of one call cost: how many, the seconds waited, and after how many retries the
    call was given up (None: it was not)."""

    retries: int = 0
    waited_s: float = 0.0
    gave_up_after: int | None = None


def with_retries(
    call: Callable[[], T],
    *,
    transient: Callable[[BaseException], bool],
    backoff: Backoff,
    rng: random.Random,
    retries: int,
    seconds_left: Callable[[], float],
    done: Retried,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `call`, again after each transient failure: at most `retries` more attempts, each after
    its back-off (honouring Retry-After), and none whose wait would outlast `seconds_left()`. The last
    failure is raised as it was; `done` counts the retries as they happen (and says when it gave up)."""
    from tenacity import RetryCallState, Retrying, retry_if_exception

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return backoff.seconds(state.attempt_number - 1, retry_after(exc) if exc else None, rng)

    def stop(state: RetryCallState) -> bool:
        retry = state.attempt_number - 1
        if retry >= retries or (state.upcoming_sleep or 0.0) >= seconds_left():
            done.gave_up_after = retry
            return True
        return False

    def before_sleep(state: RetryCallState) -> None:
        seconds = state.upcoming_sleep or 0.0
        done.retries += 1
        done.waited_s = round(done.waited_s + seconds, 3)

    retrying = Retrying(
        retry=retry_if_exception(transient), wait=wait, stop=stop, before_sleep=before_sleep, sleep=sleep,
        reraise=True,
    )  # fmt: skip
    return retrying(call)
