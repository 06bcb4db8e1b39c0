"""The bot for real: the official `openai` client against a local server
that injects errors, 20-second answers, malformed 200s and cut streams. The
breaker's clock is the test's (no sleeping through open times); the HTTP
calls are real."""

from __future__ import annotations

import threading
from typing import Iterator, List, Tuple

import openai
import pytest

import halfopen
from bot import FALLBACK, REFUSED, Bot, is_client_error
from server import Upstream, pieces, serve


@pytest.fixture
def world() -> Iterator[Tuple[Bot, Upstream, list]]:
    upstream = Upstream()
    server, url = serve(upstream)
    clock = [0.0]
    client = openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=0.5)
    breaker = halfopen.CircuitBreaker(
        "openai", clock=lambda: clock[0], exclude=is_client_error,
        failure_threshold=3, window=60.0, open_timeout=30.0, half_open_max_attempts=1,
    )
    yield Bot(client, breaker), upstream, clock
    client.close()
    server.shutdown()
    server.server_close()


def waiting(bot: Bot) -> List[str]:
    return [entry[-1] for entry in bot.waiting]  # (arrival, user, question)


def answers(bot: Bot) -> List[str]:
    return [text for _, text in bot.sent if text.startswith("answer to: ")]


@pytest.mark.parametrize("failure", ["429", "500", "slow"])
def test_the_bot_falls_back_while_open_and_answers_everything_after_recovery(world, failure: str) -> None:
    bot, upstream, clock = world
    assert bot.on_message("ana", "q0") == "answer to: q0"
    upstream.mode = failure
    for i in range(1, 4):  # three failures open the breaker
        assert bot.on_message("ana", f"q{i}") == FALLBACK
    assert bot.breaker.state is halfopen.State.OPEN
    calls_when_opened = len(upstream.calls)
    for i in range(4, 20):  # while open: the fallback at once (no I/O), nothing reaches the API
        assert bot.on_message(f"user{i}", f"q{i}") == FALLBACK
    assert len(upstream.calls) == calls_when_opened
    assert bot.breaker.metrics()["rejections"] == 16
    upstream.mode = "ok"
    clock[0] = 30.0  # the open time ends: the next question is the probe
    assert bot.on_message("bia", "q20") == "answer to: q20"
    assert bot.breaker.state is halfopen.State.CLOSED
    assert bot.replay() == 19
    questions = [f"q{i}" for i in range(21)]
    # Every question answered exactly once; the waiting ones in order.
    assert sorted(answers(bot)) == sorted(f"answer to: {q}" for q in questions)
    assert answers(bot)[2:] == [f"answer to: q{i}" for i in range(1, 20)]
    assert not bot.waiting and not bot.dead


def test_a_failed_probe_keeps_the_questions_waiting(world) -> None:
    bot, upstream, clock = world
    upstream.mode = "500"
    for i in range(3):
        bot.on_message("ana", f"q{i}")
    clock[0] = 30.0
    assert bot.replay() == 0  # the probe failed: open again, for longer
    assert bot.breaker.state is halfopen.State.OPEN
    assert bot.breaker.retry_after() == pytest.approx(60.0)
    assert waiting(bot) == ["q0", "q1", "q2"]
    upstream.mode = "ok"
    clock[0] = 90.0
    assert bot.replay() == 3 and not bot.waiting


# 1. A 200 that is no answer is the upstream's failure: counted, the question kept.
@pytest.mark.parametrize("broken", ["truncated", "html", "no-choices"])
def test_a_malformed_200_keeps_the_question_and_counts_as_a_failure(world, broken: str) -> None:
    bot, upstream, clock = world
    upstream.mode = broken
    for i in range(3):
        assert bot.on_message("ana", f"q{i}") == FALLBACK
    assert waiting(bot) == ["q0", "q1", "q2"]
    assert bot.breaker.metrics()["failures"] == 3
    assert bot.breaker.state is halfopen.State.OPEN
    upstream.mode = "ok"
    clock[0] = 30.0
    assert bot.replay() == 3
    assert answers(bot) == ["answer to: q0", "answer to: q1", "answer to: q2"]


# 2. A question the API refuses is dead-lettered: never counted, never retried, never in the way.
def test_refused_questions_are_dead_lettered_and_never_trip_the_breaker(world) -> None:
    bot, upstream, _ = world
    for i, status in enumerate(["400", "401", "403", "404", "422"]):
        upstream.modes[f"bad{i}"] = status
        told = bot.on_message(f"user{i}", f"bad{i}")
        assert told == REFUSED.format(reason=f"HTTP {status}: injected {status}")
        assert bot.dead[-1] == (f"user{i}", f"bad{i}", f"HTTP {status}: injected {status}")
        assert bot.sent[-1] == (f"user{i}", told)
    assert bot.breaker.state is halfopen.State.CLOSED  # five refusals, a threshold of three
    assert bot.breaker.metrics()["failures"] == 0 and bot.breaker.metrics()["ignored"] == 5
    assert not bot.waiting
    calls = len(upstream.calls)
    assert bot.replay() == 0 and len(upstream.calls) == calls  # never retried
    assert bot.on_message("ana", "q") == "answer to: q"


def test_a_refused_question_at_the_head_of_the_waiting_list_does_not_block_the_replay(world) -> None:
    bot, upstream, clock = world
    upstream.mode = "500"  # a sick upstream fails even the question it will refuse
    for question in ["far too long", "q1", "q2"]:
        assert bot.on_message("ana", question) == FALLBACK
    assert bot.breaker.state is halfopen.State.OPEN and waiting(bot)[0] == "far too long"
    upstream.mode = "ok"
    upstream.modes["far too long"] = "400"
    clock[0] = 30.0
    assert bot.replay() == 2  # the refused probe counts nothing: the next question probes
    assert bot.breaker.state is halfopen.State.CLOSED
    assert answers(bot) == ["answer to: q1", "answer to: q2"]
    assert bot.dead == [("ana", "far too long", "HTTP 400: injected 400")]
    assert bot.sent[-3] == ("ana", REFUSED.format(reason="HTTP 400: injected 400"))
    assert not bot.waiting


# 3. The API's Retry-After holds the breaker open that long: nothing reaches it before.
@pytest.mark.parametrize("status, headers", [
    ("429", {"Retry-After": "120"}),
    ("429", {"retry-after-ms": "120000"}),
    ("503", {"Retry-After": "120"}),
])
def test_retry_after_holds_the_breaker_open_that_long(world, status: str, headers: dict) -> None:
    bot, upstream, clock = world
    upstream.mode, upstream.headers = status, headers
    assert bot.on_message("ana", "q0") == FALLBACK  # one failure of three, but the API said 120 s
    assert bot.breaker.state is halfopen.State.OPEN
    assert bot.retry_after() == pytest.approx(120.0)
    for i, now in enumerate([30.0, 90.0, 119.5], start=1):
        clock[0] = now
        assert bot.on_message("ana", f"q{i}") == FALLBACK
        assert bot.replay() == 0
        assert bot.retry_after() == pytest.approx(120.0 - now)  # what callers are told
        with pytest.raises(halfopen.CircuitOpenError) as refused:
            bot.breaker.try_acquire()
        assert refused.value.retry_after == pytest.approx(120.0 - now)
    assert [q for _, q in upstream.calls] == ["q0"]
    upstream.mode = "ok"
    clock[0] = 120.0  # the hint ends: half-open, the next call probes
    assert bot.breaker.state is halfopen.State.HALF_OPEN
    assert bot.replay() == 4
    assert answers(bot) == [f"answer to: q{i}" for i in range(4)]


def test_a_retry_after_shorter_than_the_open_time_leaves_it(world) -> None:
    bot, upstream, clock = world
    upstream.mode = "500"
    for i in range(3):
        bot.on_message("ana", f"q{i}")
    clock[0] = 30.0
    upstream.mode, upstream.headers = "429", {"Retry-After": "5"}
    assert bot.replay() == 0  # the failed probe: open for 60 s, longer than the hint
    assert bot.breaker.retry_after() == pytest.approx(60.0)


@pytest.mark.parametrize("header", ["1e300", "18446744073710", "86401"])
def test_an_absurd_retry_after_is_a_day_and_the_question_is_kept(world, header: str) -> None:
    bot, upstream, clock = world
    upstream.mode, upstream.headers = "429", {"Retry-After": header}
    assert bot.on_message("ana", "q0") == FALLBACK  # was: a ValueError escaped, the question lost
    assert waiting(bot) == ["q0"]
    assert bot.retry_after() == pytest.approx(86_400.0)


def test_of_hints_answered_together_the_longest_holds(world) -> None:
    bot, upstream, clock = world
    hints = [5, 120, 30, 60, 1, 90, 15, 45]
    for i, seconds in enumerate(hints):
        upstream.modes[f"q{i}"] = "429"
        upstream.headers_for[f"q{i}"] = {"Retry-After": str(seconds)}
    upstream.gather(len(hints))  # all in flight together: the hints land in any order
    start = threading.Barrier(len(hints))

    def ask(i: int) -> None:
        start.wait()
        bot.on_message("ana", f"q{i}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(hints))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert bot.retry_after() == pytest.approx(120.0)  # never a shorter hint that answered later
    assert sorted(waiting(bot)) == sorted(f"q{i}" for i in range(len(hints)))


# 4. Replay from several threads: each question taken by exactly one of them, in order.
def replay_from_threads(bot: Bot, threads: int) -> List[int]:
    start = threading.Barrier(threads)
    answered: List[int] = []

    def replayer() -> None:
        start.wait()
        answered.append(bot.replay())

    workers = [threading.Thread(target=replayer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answered


def test_concurrent_replays_answer_each_question_exactly_once(world) -> None:
    bot, upstream, clock = world
    bot.breaker.force_open(30.0)
    for i in range(50):
        bot.on_message(f"user{i}", f"q{i}")
    bot.breaker.force_close()
    upstream.gather(8)  # the first eight calls are in flight together
    assert sum(replay_from_threads(bot, 8)) == 50
    assert sorted(answers(bot)) == sorted(f"answer to: q{i}" for i in range(50))
    assert sorted(q for _, q in upstream.calls) == sorted(f"q{i}" for i in range(50))
    assert not bot.waiting


def test_concurrent_replays_that_fail_keep_the_order(world) -> None:
    bot, upstream, clock = world
    bot.breaker.force_open(30.0)
    for i in range(50):
        bot.on_message(f"user{i}", f"q{i}")
    bot.breaker.force_close()
    upstream.mode = "500"
    upstream.gather(8)  # eight in flight together, all failing
    assert replay_from_threads(bot, 8) == [0] * 8
    assert sorted(q for _, q in upstream.calls) == [f"q{i}" for i in range(8)]
    assert waiting(bot) == [f"q{i}" for i in range(50)]
    assert bot.breaker.state is halfopen.State.OPEN


# 5. A streamed answer counts at the end of the stream.
def test_a_whole_stream_is_an_answer(world) -> None:
    bot, _, _ = world
    assert list(bot.stream_message("ana", "q0")) == pieces("q0")
    assert bot.sent == [("ana", "answer to: q0")]
    assert bot.breaker.metrics()["successes"] == 1


@pytest.mark.parametrize("cut", ["drop", "end"])
def test_a_stream_cut_midway_counts_as_a_failure_and_keeps_the_question(world, cut: str) -> None:
    bot, upstream, clock = world
    upstream.cut_after, upstream.cut = 2, cut
    for i in range(3):
        assert list(bot.stream_message("ana", f"q{i}")) == pieces(f"q{i}")[:2] + [FALLBACK]
    assert bot.breaker.metrics()["failures"] == 3 and bot.breaker.metrics()["successes"] == 0
    assert bot.breaker.state is halfopen.State.OPEN
    assert waiting(bot) == ["q0", "q1", "q2"]
    assert list(bot.stream_message("ana", "q3")) == [FALLBACK]  # open: nothing reaches the API
    assert len(upstream.calls) == 3
    upstream.cut_after = None
    clock[0] = 30.0
    assert bot.replay() == 4
    assert answers(bot) == [f"answer to: q{i}" for i in range(4)]


def test_breaker_call_around_a_stream_counts_a_cut_stream_as_a_success(world) -> None:
    """Why `stream_message` holds a `with` block around the whole stream:
    `call` counts when `create` returns the stream object, before any piece."""
    bot, upstream, _ = world
    upstream.cut_after = 2
    stream = bot.breaker.call(bot.client.chat.completions.create, model="m",
                              messages=[{"role": "user", "content": "q"}], stream=True)
    with pytest.raises(Exception):
        list(stream)
    assert bot.breaker.metrics()["successes"] == 1 and bot.breaker.metrics()["failures"] == 0


def test_a_reader_that_stops_counts_nothing_and_keeps_the_question(world) -> None:
    bot, _, _ = world
    stream = bot.stream_message("ana", "q0")
    assert next(stream) == pieces("q0")[0]
    stream.close()  # the user went away
    assert waiting(bot) == ["q0"]
    assert bot.breaker.metrics()["cancelled"] == 1 and bot.breaker.metrics()["failures"] == 0


def test_a_refused_stream_is_dead_lettered(world) -> None:
    bot, upstream, _ = world
    upstream.mode = "400"
    assert list(bot.stream_message("ana", "q0")) == [REFUSED.format(reason="HTTP 400: injected 400")]
    assert bot.dead == [("ana", "q0", "HTTP 400: injected 400")]
    assert bot.breaker.metrics()["failures"] == 0
