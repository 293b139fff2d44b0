"""A local chat-completions server for tests: real HTTP on 127.0.0.1, a script of replies and injected faults.

    with FakeLLMServer([fault(429, retry_after="0.05"), reply("hello")]) as server:
        client = OpenAIClient(base_url=server.base_url, model="m")
        ...
        server.requests[0]["model"]

Each POST to /v1/chat/completions is answered by the first `Rule` whose pattern matches the request's last message
(each rule gives its steps in turn, then repeats its last one), else by the next step of the script; once the script
is spent the server answers with `default` (a plain reply unless told otherwise). It records every request body it received (`requests`) and the
most requests it was serving at once (`max_concurrent`). It only answers what the test sends and stops on exit.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Step:
    """One scripted answer. `status` other than 200 answers with an OpenAI-style error body."""

    content: str | None = "ok"
    finish_reason: str = "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (longer than the client's timeout = a timeout)
    drop: bool = False  # close the socket without sending any response
    malformed: bool = False  # answer 200 with a body that is not JSON


@dataclass
class Rule:
    """Answer requests whose last message matches `pattern` (a regular expression) with `steps`, in turn."""

    pattern: str
    steps: list[Step]
    hits: int = 0

    def take(self) -> Step:
        step = self.steps[min(self.hits, len(self.steps) - 1)]
        self.hits += 1
        return step


def reply(content: str = "ok", *, prompt_tokens: int = 11, completion_tokens: int = 7, delay_s: float = 0.0) -> Step:
    return Step(content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, delay_s=delay_s)


def empty() -> Step:
    return Step(content=None, completion_tokens=0)


def truncated(content: str = "def kernel(x):\n    return", completion_tokens: int = 64) -> Step:
    return Step(content=content, finish_reason="length", completion_tokens=completion_tokens)


def fault(status: int, *, retry_after: str | None = None) -> Step:
    return Step(status=status, headers={"Retry-After": retry_after} if retry_after is not None else {})


def hang(delay_s: float) -> Step:
    return Step(delay_s=delay_s)


def drop() -> Step:
    return Step(drop=True)


def malformed() -> Step:
    return Step(malformed=True)


class FakeLLMServer:
    def __init__(self, script: Iterable[Step] = (), *, default: Step | None = None, rules: Iterable[Rule] = ()):
        self._script = list(script)
        self.rules = list(rules)
        self._default = default or reply()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self.requests: list[dict] = []
        self.usage: list[tuple[int, int]] = []  # (prompt, completion) tokens of every completion sent
        self.answered: list[dict] = []  # the request body of each of those completions, in the same order
        self.in_flight = 0
        self.max_concurrent = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "FakeLLMServer is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeLLMServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # called from handler threads
    def _next(self, body: dict) -> Step:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self.in_flight)
            messages = body.get("messages") or [{}]
            last = str(messages[-1].get("content", ""))
            for rule in self.rules:
                if re.search(rule.pattern, last):
                    return rule.take()
            return self._script.pop(0) if self._script else self._default

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler_for(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") != CHAT_PATH:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                return
            step = server._next(body)
            try:
                self._answer(step, body)
            finally:
                server._done()

        def _answer(self, step: Step, body: dict) -> None:
            if step.delay_s and server._stop.wait(step.delay_s):
                return  # server stopping
            if step.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if step.malformed:
                data = b'{"id": "chatcmpl-broken", "choices": [{"message": {"content": "cut'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if step.status != 200:
                err = {"message": f"injected HTTP {step.status}", "type": "server_error", "code": str(step.status)}
                self._send(step.status, {"error": err}, step.headers)
                return
            sent = self._send(200, {
                "id": f"chatcmpl-fake-{next(server._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": step.content},
                    "finish_reason": step.finish_reason,
                }],
                "usage": {
                    "prompt_tokens": step.prompt_tokens,
                    "completion_tokens": step.completion_tokens,
                    "total_tokens": step.prompt_tokens + step.completion_tokens,
                },
            }, step.headers)
            if sent:  # a client that gave up (timeout) may still not have read it: keep hangs out of cost tests
                with server._lock:
                    server.usage.append((step.prompt_tokens, step.completion_tokens))
                    server.answered.append(body)

        def _send(self, status: int, payload: dict, headers: Mapping[str, str] = {}) -> bool:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                return True
            except (BrokenPipeError, ConnectionResetError):
                return False  # the client gave up (timeout) before we answered

    return Handler
