"""A local stand-in for the OpenAI API (`/v1/chat/completions`) that fails on
command: answers, HTTP 429 or 500, or answers only after `slow_seconds`
(slower than the client waits). It counts the calls that reach it, so a test
can tell what the breaker let through."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, List, Tuple


class Upstream:
    """The server's behaviour and what it saw (thread-safe)."""

    def __init__(self) -> None:
        self.mode = "ok"  # "ok", "429", "500" or "slow"
        self.slow_seconds = 20.0
        self.lock = threading.Lock()
        self.calls: List[Tuple[float, str]] = []  # (when, the question)

    def seen(self, question: str) -> str:
        with self.lock:
            self.calls.append((time.monotonic(), question))
            return self.mode


def serve(upstream: Upstream) -> Tuple[ThreadingHTTPServer, str]:
    """Starts the server on a free local port; returns it and its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the handler's protocol
            body: Any = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            question = body["messages"][-1]["content"]
            mode = upstream.seen(question)
            if mode in ("429", "500"):
                self.reply(int(mode), {"error": {"message": f"injected {mode}", "type": "server_error"}})
                return
            if mode == "slow":
                time.sleep(upstream.slow_seconds)
            self.reply(200, {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"answer to: {question}"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })

        def reply(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
