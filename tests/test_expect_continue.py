"""A client sending `Expect: 100-continue` waits for `100 Continue` before its body: a request the server refuses
from its headers alone (a body over the limit, a media type it does not read) is answered at once, unread and
with `Connection: close` (RFC 9110 10.1.1), never asked for the body it refuses."""

from __future__ import annotations

import socket

import pytest

from tests.test_mcp_probe1_mends import LIMIT, notes_fusion, served_as_mcpfusion_serves


def exchange(url: str, head: str) -> bytes:
    """What the server answers to `head` (a request's head alone, no body sent) within two seconds."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(head.encode())
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                part = sock.recv(65536)
                if not part:
                    break
                answer += part
        except TimeoutError:
            pass
    return answer


@pytest.mark.parametrize(("path", "size", "media", "status"), [
    ("/mcp", LIMIT + LIMIT // 2, "application/json", b"413"),  # within twice the limit: would be read and dropped
    ("/api/notes/read", LIMIT + LIMIT // 2, "application/json", b"413"),
    ("/mcp", 100, "text/plain", b"415"),  # refused from the headers, before the body is read
])
def test_a_request_refused_from_its_headers_is_answered_without_asking_for_its_body(path, size, media, status):
    with served_as_mcpfusion_serves(notes_fusion(max_body_bytes=LIMIT)) as url:
        answer = exchange(url, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {media}\r\n"
                               "Accept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                               f"Mcp-Method: tools/list\r\nContent-Length: {size}\r\nExpect: 100-continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    assert b"100 Continue" not in answer and b"connection: close" in answer.lower()


def test_a_request_the_server_reads_still_gets_its_100_continue():
    with served_as_mcpfusion_serves(notes_fusion(max_body_bytes=LIMIT)) as url:
        answer = exchange(url, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Accept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                               "Mcp-Method: tools/list\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 100 Continue"), answer[:200]
