"""A loopback OpenAI-compatible chat server for tests: the real `openai` client talks HTTP to it on 127.0.0.1, so
its retries, timeouts and error mapping are exercised without any network. Each call's answer is scripted (text,
an HTTP error, or a request left hanging), and every request is recorded with its headers.

    with LoopbackServer(["first answer", error(429), "second"]) as server:
        engine = EndpointEngine(server.url, "tiny", timeout_s=1, retries=1)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class Answer:
    """One call's answer: `content` with status 200, an error `status` (its JSON body says `content`), or `hang`:
    the request is read and never answered until the server closes. An error tells the client to retry after 10 ms
    (retry-after-ms; the openai client ignores a retry-after of 0 and backs off half a second), or, without `retry`,
    not to retry. `completion_tokens` defaults to the content's words."""

    content: str = ""
    status: int = 200
    hang: bool = False
    retry: bool = True
    completion_tokens: int | None = None
    finish_reason: str = "stop"


HANG = Answer(hang=True)


def error(status: int, message: str = "scripted error") -> Answer:
    """An HTTP error answer, e.g. 429 or 500, that the client retries at once."""
    return Answer(content=message, status=status)


@dataclass(frozen=True)
class Request:
    """What the client sent: the path, the JSON body and the headers (names lower-cased)."""

    path: str
    body: dict
    headers: dict[str, str]


AnswerSource = Callable[[dict, int], "Answer | str"] | Sequence["Answer | str"]


class LoopbackServer:
    """A ThreadingHTTPServer on 127.0.0.1 at a free port, serving in a daemon thread while open. `answers` is a
    callable (request body, call number from 0) -> Answer, or a list served in turn; a plain str is a 200 answer;
    `models`: the names GET /v1/models lists.
    A call past the list's end gets a 500 the client does not retry (x-should-retry: false). `requests`: every chat
    request so far, in order, for tests to check what was sent."""

    def __init__(self, answers: AnswerSource, models: Sequence[str] = ("tiny",)) -> None:
        self.answers = answers
        self.models = list(models)  # what GET /v1/models lists
        self.requests: list[Request] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.block_on_close = False  # closing must not wait on a client that connected and sent nothing
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"loopback-openai-{self.port}")
        self._thread.start()

    def answer_for(self, body: dict, headers: dict[str, str], path: str) -> Answer:
        """Record the request and pick its answer (thread-safe: the client may send several at once)."""
        with self._lock:
            call = len(self.requests)
            self.requests.append(Request(path, body, headers))
        if callable(self.answers):
            answer = self.answers(body, call)
        elif call < len(self.answers):
            answer = self.answers[call]
        else:
            answer = Answer(f"the loopback server has no answer for call {call}", status=500, retry=False)
        return Answer(answer) if isinstance(answer, str) else answer

    def close(self) -> None:
        """Stop serving: hanging requests end at once, the port is released."""
        self.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # no access log in the test output

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") != MODELS_PATH:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                         "owned_by": "loopback"} for name in server.models]})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"unreadable": raw.decode("utf-8", "replace")}
            headers = {name.lower(): value for name, value in self.headers.items()}
            if self.path.rstrip("/") != CHAT_PATH:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            answer = server.answer_for(body, headers, self.path)
            if answer.hang:
                server.stop.wait()  # until the server closes; then the connection drops unanswered
                return
            if answer.status != 200:
                retry = {"retry-after": "0", "retry-after-ms": "10"} if answer.retry else {"x-should-retry": "false"}
                self._send(answer.status, {"error": {"message": answer.content, "type": "scripted",
                                                     "code": answer.status}}, retry)
                return
            prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            completion = (answer.completion_tokens if answer.completion_tokens is not None
                          else len(answer.content.split()))
            self._send(200, {
                "id": f"chatcmpl-loopback-{len(server.requests)}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.content},
                             "finish_reason": answer.finish_reason}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}})

    return Handler
