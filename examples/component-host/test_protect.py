"""The example against a real local HTTP server that fails for a while:
the breaker opens, the server sees no calls while it is open but the
probes, and it closes once the server is back. The clock is injected (one
second per call), so nothing sleeps."""

import http.server
import threading

from protect import protect


class Flaky(http.server.BaseHTTPRequestHandler):
    """Fails requests 5 to 12 (the upstream is down), answers the rest."""

    seen = failed = 0

    def do_GET(self) -> None:  # noqa: N802
        Flaky.seen += 1
        down = 5 <= Flaky.seen <= 12
        Flaky.failed += down
        self.send_response(503 if down else 200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


def test_the_breaker_opens_spares_the_server_and_closes_again() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tick = [0]

        def clock() -> int:
            tick[0] += 1_000_000  # one second per reading
            return tick[0]

        lines = []
        sent, refused = protect(f"http://127.0.0.1:{server.server_port}/", 120, clock=clock, pause=lambda: None, log=lines.append)
    finally:
        server.shutdown()
    transitions = [line.split("s  ", 1)[1] for line in lines]
    assert transitions[0] == "closed -> open (consecutive_failures)".replace("_", "-"), lines
    assert "half-open -> closed (probes-succeeded)" in transitions[-1], lines
    assert any("half-open -> open (probe-failed)" in t for t in transitions), "the server was still down at a probe"
    assert sent == Flaky.seen and sent + refused == 120
    # While it was down, the server saw the 5 failures that opened the
    # breaker and then one probe per open period, nothing else.
    probes = sum("open -> half-open" in t for t in transitions)
    failed_probes = sum("probe-failed" in t for t in transitions)
    assert (probes, failed_probes) == (4, 3), transitions
    assert Flaky.failed == 5 + failed_probes
    assert refused >= 3 * 10 - 3, f"refused {refused} calls while open (10 s each, two readings per call sent)"


class Truncated(http.server.BaseHTTPRequestHandler):
    """Promises 100 bytes and sends 2: the client raises IncompleteRead, which is not an OSError."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b"ok")
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


def test_a_call_that_fails_with_any_exception_is_reported_and_holds_no_probe() -> None:
    # Before, an IncompleteRead escaped protect() with its permit unreported.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Truncated)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tick = [0]

        def clock() -> int:
            tick[0] += 1_000_000
            return tick[0]

        lines = []
        sent, refused = protect(f"http://127.0.0.1:{server.server_port}/", 30, clock=clock, pause=lambda: None, log=lines.append)
    finally:
        server.shutdown()
    transitions = [line.split("s  ", 1)[1] for line in lines]
    assert transitions[0] == "closed -> open (consecutive-failures)", lines
    # Every probe was reported (failed), so each open period let one through: none was held busy.
    assert sum("open -> half-open" in t for t in transitions) == sum("probe-failed" in t for t in transitions) >= 1, transitions
    assert sent + refused == 30 and sent >= 5 + 1
