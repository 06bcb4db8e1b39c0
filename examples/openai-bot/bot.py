"""Seed 000's case 3: a health-insurance bot whose every message calls the
OpenAI API. When the model slows down or fails, the breaker opens; while it
is open the bot answers at once with a fallback ("high volume, we'll get
back to you"), keeps the question, and answers it after recovery.

The client is set so that the breaker sees what happens: `max_retries=0`
(the client's own retries would hide failures from the breaker and
multiply the calls on a sick upstream) and a `timeout` shorter than the
user will wait (a 20-second answer becomes a failure after it, which the
breaker counts)."""

from __future__ import annotations

from collections import deque
from typing import Deque, List, Tuple

import openai

import halfopen

FALLBACK = "We are answering a high volume of messages; we will get back to you shortly."


class Bot:
    def __init__(self, client: openai.OpenAI, breaker: halfopen.CircuitBreaker, model: str = "gpt-4o-mini") -> None:
        self.client = client
        self.breaker = breaker
        self.model = model
        self.waiting: Deque[Tuple[str, str]] = deque()  # (user, question)
        self.sent: List[Tuple[str, str]] = []  # what reached users: (user, text)

    def ask(self, question: str) -> str:
        completion = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": question}]
        )
        return completion.choices[0].message.content or ""

    def on_message(self, user: str, question: str) -> str:
        """Answers now, or with the fallback (the question waits for recovery)."""
        try:
            answer = self.breaker.call(self.ask, question)
        except (halfopen.CircuitBreakerError, openai.APIError):
            # Refused (open), or failed (429, 500, timeout: counted by the breaker).
            self.waiting.append((user, question))
            answer = FALLBACK
        self.sent.append((user, answer))
        return answer

    def replay(self) -> int:
        """Answers the waiting questions, in order, while the breaker admits
        them; returns how many were answered."""
        answered = 0
        while self.waiting:
            user, question = self.waiting[0]
            try:
                answer = self.breaker.call(self.ask, question)
            except (halfopen.CircuitBreakerError, openai.APIError):
                break
            self.waiting.popleft()
            self.sent.append((user, answer))
            answered += 1
        return answered
