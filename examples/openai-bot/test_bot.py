"""The bot for real: the official `openai` client against a local server
that injects 429s, 500s and 20-second answers. The breaker's clock is the
test's (no sleeping through open times); the HTTP calls are real."""

from __future__ import annotations

import time
from typing import Iterator, Tuple

import openai
import pytest

import halfopen
from bot import FALLBACK, Bot
from server import Upstream, serve


@pytest.fixture
def world() -> Iterator[Tuple[Bot, Upstream, list]]:
    upstream = Upstream()
    server, url = serve(upstream)
    clock = [0.0]
    client = openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=0.5)
    breaker = halfopen.CircuitBreaker(
        "openai", clock=lambda: clock[0], failure_threshold=3, window=60.0, open_timeout=30.0, half_open_max_attempts=1
    )
    yield Bot(client, breaker), upstream, clock
    server.shutdown()


@pytest.mark.parametrize("failure", ["429", "500", "slow"])
def test_the_bot_falls_back_while_open_and_answers_everything_after_recovery(world, failure: str) -> None:
    bot, upstream, clock = world
    assert bot.on_message("ana", "q0") == "answer to: q0"
    upstream.mode = failure
    for i in range(1, 4):  # three failures open the breaker
        assert bot.on_message("ana", f"q{i}") == FALLBACK
    assert bot.breaker.state is halfopen.State.OPEN
    calls_when_opened = len(upstream.calls)
    for i in range(4, 20):  # while open: the fallback at once, nothing reaches the API
        started = time.monotonic()
        assert bot.on_message(f"user{i}", f"q{i}") == FALLBACK
        assert time.monotonic() - started < 0.1
    assert len(upstream.calls) == calls_when_opened
    upstream.mode = "ok"
    clock[0] = 30.0  # the open time ends: the next question is the probe
    assert bot.on_message("bia", "q20") == "answer to: q20"
    assert bot.breaker.state is halfopen.State.CLOSED
    assert bot.replay() == 19
    answers = [text for _, text in bot.sent if text != FALLBACK]
    questions = [f"q{i}" for i in range(21)]
    # Every question answered exactly once; the waiting ones in order.
    assert sorted(answers) == sorted(f"answer to: {q}" for q in questions)
    assert answers[2:] == [f"answer to: q{i}" for i in range(1, 20)]
    assert not bot.waiting


def test_a_failed_probe_keeps_the_questions_waiting(world) -> None:
    bot, upstream, clock = world
    upstream.mode = "500"
    for i in range(3):
        bot.on_message("ana", f"q{i}")
    clock[0] = 30.0
    assert bot.replay() == 0  # the probe failed: open again, for longer
    assert bot.breaker.state is halfopen.State.OPEN
    assert bot.breaker.retry_after() == pytest.approx(60.0)
    assert len(bot.waiting) == 3 and [q for _, q in bot.waiting] == ["q0", "q1", "q2"]
    upstream.mode = "ok"
    clock[0] = 90.0
    assert bot.replay() == 3 and not bot.waiting
