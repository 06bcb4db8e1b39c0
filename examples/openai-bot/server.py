"""A local stand-in for the OpenAI API (`/v1/chat/completions`) that fails on
command. It counts the calls that reach it, so a test can tell what the
breaker let through.

`Upstream.mode` (or `Upstream.modes[question]`, for one question only):

- "ok": an answer ("answer to: <question>"); streamed as server-sent events
  (in `STREAM_PIECES` pieces, then `[DONE]`) when the request says `stream`;
- an HTTP status ("400", "429", "500", ...): an OpenAI-style error, with
  `Upstream.headers` (e.g. `{"Retry-After": "120"}`);
- "slow": the answer after `slow_seconds` (slower than the client waits);
- malformed 200s: "truncated" (JSON cut midway), "html" (a proxy's error
  page), "no-choices" (JSON without `choices`).

`Upstream.cut_after = n` cuts a stream after n pieces: the connection drops
(`cut = "drop"`: an incomplete chunked body) or the body ends as if complete
(`cut = "end"`: no finish_reason, no `[DONE]`).

`Upstream.gather(n)` holds the next n calls until all n have arrived (calls
in flight together, without sleeping)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

STREAM_PIECES = 4


class Upstream:
    """The server's behaviour and what it saw (thread-safe)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.modes: Dict[str, str] = {}  # question -> mode, over `mode`
        self.headers: Dict[str, str] = {}  # sent with error statuses
        self.headers_for: Dict[str, Dict[str, str]] = {}  # question -> headers, over `headers`
        self.slow_seconds = 20.0
        self.cut_after: Optional[int] = None
        self.cut = "drop"  # or "end"
        self.lock = threading.Lock()
        self.calls: List[Tuple[float, str]] = []  # (when, the question)
        self._barrier: Optional[threading.Barrier] = None
        self._to_hold = 0

    def gather(self, n: int) -> None:
        """Holds the next n calls until all n have arrived."""
        with self.lock:
            self._barrier, self._to_hold = threading.Barrier(n), n

    def seen(self, question: str) -> str:
        with self.lock:
            self.calls.append((time.monotonic(), question))
            barrier = self._barrier if self._to_hold else None
            self._to_hold = max(0, self._to_hold - 1)
            mode = self.modes.get(question, self.mode)
        if barrier is not None:
            barrier.wait(timeout=10)  # a guard against a test that never gathers them
        return mode


def completion(model: str, question: str) -> Dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": f"answer to: {question}"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def pieces(question: str) -> List[str]:
    """"answer to: <question>" in STREAM_PIECES pieces (joined, the whole)."""
    text = f"answer to: {question}"
    step = -(-len(text) // STREAM_PIECES)
    return [text[i:i + step] for i in range(0, len(text), step)]


def serve(upstream: Upstream) -> Tuple[ThreadingHTTPServer, str]:
    """Starts the server on a free local port; returns it and its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams as the real API sends them

        def do_POST(self) -> None:  # noqa: N802 - the handler's protocol
            body: Any = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            question = body["messages"][-1]["content"]
            mode = upstream.seen(question)
            if mode.isdigit():
                error = {"error": {"message": f"injected {mode}", "type": "injected", "code": None}}
                self.reply(int(mode), json.dumps(error).encode(), headers=upstream.headers_for.get(question, upstream.headers))
            elif mode == "truncated":
                self.reply(200, json.dumps(completion(body["model"], question)).encode()[:40])
            elif mode == "html":
                self.reply(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html")
            elif mode == "no-choices":
                self.reply(200, json.dumps({"id": "chatcmpl-local", "object": "chat.completion"}).encode())
            else:
                if mode == "slow":
                    time.sleep(upstream.slow_seconds)
                if body.get("stream"):
                    self.stream(body["model"], question)
                else:
                    self.reply(200, json.dumps(completion(body["model"], question)).encode())

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away (its timeout, a stream it stopped reading)

        def reply(self, status: int, data: bytes, content_type: str = "application/json",
                  headers: Optional[Dict[str, str]] = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def stream(self, model: str, question: str) -> None:
            parts = pieces(question)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            if upstream.cut_after is not None and upstream.cut_after < len(parts):
                # Said before the cut: a body ended as if whole would leave the client
                # a kept-alive connection that the next call finds closed.
                self.send_header("Connection", "close")
            self.end_headers()
            for i, text in enumerate(parts):
                if upstream.cut_after is not None and i == upstream.cut_after:
                    return self.cut_stream()
                last = i == len(parts) - 1
                self.event({"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": 0, "model": model,
                            "choices": [{"index": 0, "delta": {"content": text},
                                         "finish_reason": "stop" if last else None}]})
            self.chunk(b"data: [DONE]\n\n")
            self.chunk(b"")  # the chunked body's end

        def event(self, payload: Any) -> None:
            self.chunk(f"data: {json.dumps(payload)}\n\n".encode())

        def chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def cut_stream(self) -> None:
            if upstream.cut == "end":
                self.chunk(b"")  # a body that ends as if it were whole
            else:
                self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops midway

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 128  # the default 5 drops a burst of connections (retried after 1 s)
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
