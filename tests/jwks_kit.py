"""A JWKS endpoint on 127.0.0.1 for the tests: slow, held or counting its fetches on demand."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JWKSEndpoint:
    """A JWKS URL on 127.0.0.1 (a free port): answers `body`, after `delay` seconds (cut short by `release`);
    counts the requests and how many are answered at once."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.delay = 0.0
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                endpoint.requests += 1
                endpoint.in_flight += 1
                endpoint.most_in_flight = max(endpoint.most_in_flight, endpoint.in_flight)
                try:
                    endpoint.release.wait(endpoint.delay)
                    body = endpoint.body
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (its timeout)
                    pass
                finally:
                    endpoint.in_flight -= 1

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/jwks"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def serve(self, *jwks: dict) -> None:
        self.body = json.dumps({"keys": list(jwks)}).encode()

    def __enter__(self) -> JWKSEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
