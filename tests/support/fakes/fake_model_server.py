"""A local fake of OpenAI-compatible, rerank and DashScope-native model endpoints.

The real `openai`, `dashscope` and `httpx` clients talk to it over HTTP on 127.0.0.1, so tests
exercise the actual SDK code paths offline and without a key::

    with FakeModelServer() as server:
        server.script("/v1/chat/completions", [Reply(status=429, headers={"Retry-After": "1"}),
                                               Reply(json={...})])
        model = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-test")
        ...
        assert len(server.requests_to("/v1/chat/completions")) == 2

Each route answers from its scripted queue first, then with a deterministic default answer.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

OPENAI_EMBEDDINGS = "/v1/embeddings"
OPENAI_CHAT = "/v1/chat/completions"
RERANK = "/v1/rerank"
DASHSCOPE_EMBEDDINGS = "/api/v1/services/embeddings/text-embedding/text-embedding"
DASHSCOPE_GENERATION = "/api/v1/services/aigc/text-generation/generation"
DASHSCOPE_RERANK = "/api/v1/services/rerank/text-rerank/text-rerank"


@dataclass
class Reply:
    """One scripted response.

    ``json`` is sent as ``application/json``; ``body`` as raw bytes/text; ``sse`` as an
    OpenAI-style event stream (each item a ``data:`` event, then ``data: [DONE]``);
    ``dashscope_sse`` as a DashScope-style event stream. ``delay`` sleeps before answering.
    """

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    sse: list[Any] | None = None
    dashscope_sse: list[Any] | None = None
    content_type: str | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


Handler = Callable[["FakeModelServer", RecordedRequest], Reply]


class FakeModelServer:
    """Threaded HTTP server on 127.0.0.1 (port chosen by the OS); use as a context manager."""

    def __init__(self, embedding_dim: int = 8, chat_text: str | None = None) -> None:
        self.embedding_dim = embedding_dim
        self.chat_text = chat_text
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._handlers: dict[str, Handler] = {
            OPENAI_EMBEDDINGS: _openai_embeddings,
            OPENAI_CHAT: _openai_chat,
            RERANK: _rerank,
            DASHSCOPE_EMBEDDINGS: _dashscope_embeddings,
            DASHSCOPE_GENERATION: _dashscope_generation,
            DASHSCOPE_RERANK: _dashscope_rerank,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> "FakeModelServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-model-server",
                                        kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting -------------------------------------------------------------------------------

    def script(self, path: str, responses: Iterable[Reply | dict]) -> None:
        """Queue responses for ``path``; each request takes the next one, then defaults apply."""
        with self._lock:
            for response in responses:
                self._scripts[path].append(
                    response if isinstance(response, Reply) else Reply(**response))

    def route(self, path: str, handler: Handler) -> None:
        """Replace the default answer of ``path``."""
        self._handlers[path] = handler

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path == path]

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            queue = self._scripts.get(request.path)
            if queue:
                return queue.popleft()
        handler = self._handlers.get(request.path)
        if handler is None:
            return Reply(status=404, json={"error": {"message": f"no route {request.path}"}})
        return handler(self, request)


# ---------------------------------------------------------------------------------------------
# HTTP plumbing


def _make_handler(owner: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
            return None

        def do_POST(self) -> None:  # noqa: N802
            self._serve()

        def do_GET(self) -> None:  # noqa: N802
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            request = RecordedRequest(
                method=self.command, path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()}, body=body, json=parsed)
            reply = owner._answer(request)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self._send(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def _send(self, reply: Reply) -> None:
            payload, content_type = _encode(reply)
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

    return _Handler


def _encode(reply: Reply) -> tuple[bytes, str]:
    if reply.sse is not None:
        events = "".join(f"data: {json.dumps(item)}\n\n" for item in reply.sse)
        return (events + "data: [DONE]\n\n").encode(), reply.content_type or "text/event-stream"
    if reply.dashscope_sse is not None:
        events = "".join(
            f"id:{n}\nevent:result\n:HTTP_STATUS/{reply.status}\ndata:{json.dumps(item)}\n\n"
            for n, item in enumerate(reply.dashscope_sse, start=1))
        return events.encode(), reply.content_type or "text/event-stream;charset=UTF-8"
    if reply.json is not None:
        return json.dumps(reply.json).encode(), reply.content_type or "application/json"
    body = reply.body or b""
    data = body.encode() if isinstance(body, str) else body
    return data, reply.content_type or "text/plain"


# ---------------------------------------------------------------------------------------------
# Deterministic default answers


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic pseudo-embedding of ``text`` (not normalised)."""
    digest = hashlib.sha256(text.encode()).digest()
    while len(digest) < dim:
        digest += hashlib.sha256(digest).digest()
    return [(byte - 127.5) / 127.5 for byte in digest[:dim]]


def overlap_score(query: str, document: str) -> float:
    words = set(query.lower().split())
    hits = sum(1 for word in document.lower().split() if word in words)
    return round(hits / (1 + len(document.split())), 6)


def _last_user_text(messages: list[dict]) -> str:
    for message in reversed(messages or []):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def _chat_text(server: FakeModelServer, messages: list[dict]) -> str:
    return server.chat_text if server.chat_text is not None else (
        "echo: " + _last_user_text(messages))


def _pieces(text: str, count: int = 3) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[start:start + size] for start in range(0, len(text), size)]


def _openai_embeddings(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else texts
    dim = int(body.get("dimensions") or server.embedding_dim)
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
            for i, t in enumerate(texts)]
    tokens = sum(len(t.split()) for t in texts)
    return Reply(json={"object": "list", "data": data, "model": body.get("model"),
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def openai_completion(text: str, model: str = "fake-model", prompt_tokens: int = 11,
                      completion_tokens: int = 7) -> dict:
    """An OpenAI chat.completion body."""
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def openai_tool_calls(*calls: tuple[str, str, str], model: str = "fake-model") -> dict:
    """An OpenAI chat.completion body whose message asks for tool calls, each ``(id, name,
    arguments)`` with the arguments as the model's text (JSON, or not)."""
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [
                         {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                         for call_id, name, arguments in calls]}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def openai_chunks(pieces: list[str], model: str = "fake-model") -> list[dict]:
    """OpenAI chat.completion.chunk bodies for a stream of ``pieces``."""
    chunks = [{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
               "model": model, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                   "content": ""},
                                            "finish_reason": None}]}]
    for piece in pieces:
        chunks.append({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                       "created": 1700000000, "model": model,
                       "choices": [{"index": 0, "delta": {"content": piece},
                                    "finish_reason": None}]})
    chunks.append({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                   "created": 1700000000, "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return chunks


def _openai_chat(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    text = _chat_text(server, body.get("messages") or [])
    model = body.get("model") or "fake-model"
    if body.get("stream"):
        return Reply(sse=openai_chunks(_pieces(text), model))
    return Reply(json=openai_completion(text, model))


def _rerank(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    query, documents = body.get("query", ""), body.get("documents") or []
    results = [{"index": i, "relevance_score": overlap_score(query, doc)}
               for i, doc in enumerate(documents)]
    results.sort(key=lambda item: item["relevance_score"], reverse=True)
    top_n = body.get("top_n") or len(results)
    return Reply(json={"model": body.get("model"), "results": results[:top_n],
                       "usage": {"total_tokens": 5}})


def _dashscope_embeddings(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    texts = (body.get("input") or {}).get("texts") or []
    dim = int((body.get("parameters") or {}).get("dimension") or server.embedding_dim)
    embeddings = [{"text_index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(texts)]
    embeddings.reverse()  # the real service does not promise order; clients must sort
    return Reply(json={"output": {"embeddings": embeddings},
                       "usage": {"total_tokens": sum(len(t.split()) for t in texts)},
                       "request_id": "req-fake"})


def dashscope_message(text: str, input_tokens: int = 13, output_tokens: int = 5,
                      finish_reason: str = "stop") -> dict:
    """A DashScope generation body with ``result_format="message"``."""
    return {"output": {"choices": [{"finish_reason": finish_reason,
                                    "message": {"role": "assistant", "content": text}}]},
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens},
            "request_id": "req-fake"}


def dashscope_error(code: str, message: str) -> dict:
    return {"code": code, "message": message, "request_id": "req-fake"}


def _dashscope_generation(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    text = _chat_text(server, (body.get("input") or {}).get("messages") or [])
    parameters = body.get("parameters") or {}
    if parameters.get("stream") or request.headers.get("x-dashscope-sse") == "enable":
        pieces = _pieces(text)
        events = [dashscope_message(piece, finish_reason="null") for piece in pieces[:-1]]
        events.append(dashscope_message(pieces[-1] if pieces else ""))
        return Reply(dashscope_sse=events)
    return Reply(json=dashscope_message(text))


def _dashscope_rerank(server: FakeModelServer, request: RecordedRequest) -> Reply:
    body = request.json or {}
    rerank_input = body.get("input") or {}
    query, documents = rerank_input.get("query", ""), rerank_input.get("documents") or []
    results = [{"index": i, "relevance_score": overlap_score(query, doc)}
               for i, doc in enumerate(documents)]
    results.sort(key=lambda item: item["relevance_score"], reverse=True)
    return Reply(json={"output": {"results": results}, "usage": {"total_tokens": 9},
                       "request_id": "req-fake"})
