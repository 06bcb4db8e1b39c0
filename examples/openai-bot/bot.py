"""Seed 000's case 3: a health-insurance bot whose every message calls the
OpenAI API. When the model slows down or fails, the breaker opens; while it
is open the bot answers at once with a fallback ("high volume, we'll get
back to you"), keeps the question, and answers it after recovery.

What it guarantees: every question is answered, kept (in `waiting`, answered
by `replay()`), or dead-lettered (in `dead`, with the reason, its user told)
- never silently lost. How each outcome is classified is README.md's table:
the API refusing the question itself (a 4xx but 408, 409 and 429) is not the
upstream's health (`exclude=is_client_error` on the breaker) and asking again
cannot help, so it is dead-lettered; everything else that is not an answer
(408, 409, 429, 5xx, a timeout, a connection error, a 200 that is no answer,
a stream cut midway) is the upstream's failure: counted, and the question
kept. A `Retry-After` (or `retry-after-ms`) holds the breaker open that long.

The client is set so that the breaker sees what happens: `max_retries=0`
(the client's own retries would hide failures from the breaker and
multiply the calls on a sick upstream) and a `timeout` shorter than the
user will wait (a 20-second answer becomes a failure after it, which the
breaker counts)."""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from typing import Iterator, List, Optional, Tuple, TypeGuard

import openai

import halfopen

FALLBACK = "We are answering a high volume of messages; we will get back to you shortly."
REFUSED = "Sorry, we cannot answer this message ({reason})."


def is_client_error(exc: BaseException) -> TypeGuard[openai.APIStatusError]:
    """The API refused this request itself (400, 401, 403, 404, 422: any 4xx
    but 408, 409 and 429): not the upstream's health. Give it to the breaker
    as `exclude=is_client_error`; the bot dead-letters the question."""
    return isinstance(exc, openai.APIStatusError) and 400 <= exc.status_code < 500 and exc.status_code not in (408, 409, 429)


class BrokenAnswer(Exception):
    """A 200 that is no answer (truncated JSON, a proxy's HTML page, no
    `choices`, no text) or a stream cut before its end: the upstream's failure."""


#: The longest wait a hint can impose: a day (a proxy's absurd Retry-After
#: must not park every question for ever; the breaker's own backoff and
#: `force_open()` by hand still apply).
MAX_HINT = 86_400.0


def retry_after_hint(exc: BaseException) -> Optional[float]:
    """The seconds the API asked to wait (`retry-after-ms`, or `Retry-After`
    in seconds), at most `MAX_HINT`, or None."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if "retry-after-ms" in headers:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif "retry-after" in headers:
            seconds = float(headers["retry-after"])  # an HTTP-date is ignored: the breaker's own time applies
        else:
            return None
    except ValueError:
        return None
    return min(seconds, MAX_HINT) if math.isfinite(seconds) and seconds > 0 else None


class Bot:
    def __init__(self, client: openai.OpenAI, breaker: halfopen.CircuitBreaker, model: str = "gpt-4o-mini") -> None:
        """`breaker` must be made with `exclude=is_client_error`."""
        self.client = client
        self.breaker = breaker
        self.model = model
        self.lock = threading.Lock()  # over the three lists
        self.waiting: List[Tuple[int, str, str]] = []  # (arrival, user, question), oldest first
        self.dead: List[Tuple[str, str, str]] = []  # (user, question, reason): refused by the API, never retried
        self.sent: List[Tuple[str, str]] = []  # what reached users: (user, text)
        self._arrivals = itertools.count()

    def ask(self, question: str) -> str:
        try:
            completion = self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": question}]
            )
            text = completion.choices[0].message.content
        except (ValueError, AttributeError, TypeError, LookupError) as exc:  # JSONDecodeError is a ValueError
            raise BrokenAnswer(f"a 200 that is no chat completion: {exc!r}") from exc
        if not isinstance(text, str):
            raise BrokenAnswer("an answer without text")
        return text

    def on_message(self, user: str, question: str) -> str:
        """Answers now; or the fallback (the question waits for recovery);
        or, if the API refuses the question itself, says so (dead-lettered)."""
        try:
            answer = self.breaker.call(self.ask, question)
        except Exception as exc:  # refused by the breaker, or failed: see _not_answered
            answer = self._not_answered(user, question, exc)
        self._send(user, answer)
        return answer

    def stream_message(self, user: str, question: str) -> Iterator[str]:
        """`on_message` for a streamed answer: yields its pieces as they
        arrive. The `with breaker:` block holds the whole stream, so the
        breaker counts how it ends: a stream cut midway (dropped, or ended
        without a finish_reason) is a failure and the question is kept (the
        fallback follows the pieces sent). A caller that stops reading counts
        nothing (the upstream did no wrong) and the question is kept too."""
        pieces: List[str] = []
        try:
            with self.breaker, self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": question}], stream=True
            ) as stream:
                finished = False
                for chunk in stream:
                    for choice in chunk.choices:
                        if choice.delta and choice.delta.content:
                            pieces.append(choice.delta.content)
                            yield choice.delta.content
                        finished = finished or choice.finish_reason is not None
                if not finished:
                    raise BrokenAnswer("the stream ended before its finish_reason")
        except GeneratorExit:
            self._keep(user, question)
            raise
        except Exception as exc:  # refused, failed, or cut (httpx.RemoteProtocolError, BrokenAnswer)
            told = self._not_answered(user, question, exc)
            self._send(user, told)
            yield told
            return
        self._send(user, "".join(pieces))

    def replay(self) -> int:
        """Answers the waiting questions, oldest first, while the breaker
        admits them; returns how many it answered. Safe from several threads:
        each question is taken by one of them, and one not answered goes back
        to its place."""
        answered = 0
        while True:
            with self.lock:
                if not self.waiting:
                    return answered
                arrival, user, question = self.waiting.pop(0)
            try:
                answer = self.breaker.call(self.ask, question)
            except Exception as exc:
                told = self._not_answered(user, question, exc, arrival)
                if not is_client_error(exc):
                    return answered  # kept in its place: the upstream is not answering
                self._send(user, told)  # dead-lettered: its user is told; the next one may go
                continue
            self._send(user, answer)
            answered += 1

    def retry_after(self) -> Optional[float]:
        """Seconds until the API is worth asking again (its own Retry-After
        when it gave one): when to call `replay()`. None: held open by hand."""
        return self.breaker.retry_after()

    def _not_answered(self, user: str, question: str, exc: Exception, arrival: Optional[int] = None) -> str:
        """Dead-letters or keeps a question the API did not answer; returns
        what to tell its user."""
        if is_client_error(exc):
            detail = exc.body.get("message") if isinstance(exc.body, dict) else None
            reason = f"HTTP {exc.status_code}: {detail or exc.response.reason_phrase}"
            with self.lock:
                self.dead.append((user, question, reason))
            return REFUSED.format(reason=reason)
        # Refused by the breaker, or the upstream's failure (which it counted).
        hint = retry_after_hint(exc)
        if hint is not None:
            # Open at least that long, then half-open: the next call probes. One
            # call: a longer open period in force (another thread's hint, the
            # breaker's own backoff) is kept.
            self.breaker.force_open_at_least(hint)
        self._keep(user, question, arrival)
        return FALLBACK

    def _keep(self, user: str, question: str, arrival: Optional[int] = None) -> None:
        with self.lock:
            bisect.insort(self.waiting, (next(self._arrivals) if arrival is None else arrival, user, question))

    def _send(self, user: str, text: str) -> None:
        with self.lock:
            self.sent.append((user, text))
