"""An OpenAI-compatible chat server that misbehaves on purpose, one way per request.

Each POST /v1/chat/completions takes the next fault from `faults` ("ok" when none is
left) and keeps the request's messages in `requests`:
- ok: "Paris is the capital of France." streamed, finish_reason, [DONE];
- error500: HTTP 500 with a JSON error;
- stall_first: headers, then nothing;
- stall_mid: two chunks ("Paris is"), then nothing;
- cut: two chunks, then the connection closes (no finish_reason, no [DONE]);
- malformed: a chunk, then a line that is not JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = ["Paris", " is", " the", " capital", " of", " France", "."]
STALL_S = 60.0


def _chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "faulty",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
    return f"data: {json.dumps(body)}\n\n".encode()


class FaultyLLM:
    def __init__(self) -> None:
        self.faults: deque[str] = deque()
        self.requests: list[list[dict[str, Any]]] = []
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._json(200, {"object": "list", "data": [{"id": "faulty"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body["messages"])
                fault = server.faults.popleft() if server.faults else "ok"
                if fault == "error500":
                    self._json(500, {"error": {"message": "the model fell over"}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                if fault == "stall_first":
                    self._stall()
                    return
                words = WORDS if fault == "ok" else WORDS[:2]
                for word in words:
                    self.wfile.write(_chunk(word))
                    self.wfile.flush()
                if fault == "ok":
                    self.wfile.write(_chunk(finish="stop") + b"data: [DONE]\n\n")
                elif fault == "stall_mid":
                    self._stall()
                elif fault == "malformed":
                    self.wfile.write(b"data: {this is not json\n\n")
                # cut: return, and the connection closes

            def _stall(self) -> None:
                server._stop.wait(STALL_S)

            def _json(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        time.sleep(0.1)
