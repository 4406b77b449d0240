#!/usr/bin/env python3
"""A loopback HTTP proxy in front of an S3-compatible server that injects
the faults the replica store must survive (issue 36). Python stdlib only.

    s3-fault-proxy.py --upstream http://127.0.0.1:PORT [--port 0] [--host 127.0.0.1]

Prints "s3-fault-proxy listening on PORT" once it accepts connections.
Faults are chosen while it runs, by a control request that never reaches
the upstream:

    POST /__fault__   {"mode": "...", "count": N, "delay": S, "skip": K}

mode (for the next `count` requests, or all of them when count is -1 or
absent; then back to "pass"; the first `skip` requests the mode applies
to are forwarded unchanged and not counted):
    pass          forward unchanged
    refuse        close the connection without answering
    delay         wait `delay` seconds, then forward
    status500     answer 500 InternalError
    slowdown      answer 503 SlowDown
    truncate-get  forward; cut the body of a GET object answer in half
                  (Content-Length says the cut length, as a re-framing
                  middlebox would: only the checksum can tell)
    cut-listing   forward; in a ListObjectsV2 answer, set IsTruncated to
                  true and drop NextContinuationToken
    copy-error    applies to CopyObject requests only (a PUT with
                  x-amz-copy-source; the others are forwarded and not
                  counted): answer 200 with an InternalError document, as
                  S3 may answer a copy that failed once it started
GET /__fault__ answers {"mode": ..., "remaining": ..., "requests": N,
"kinds": {...}}, N the number of requests seen so far (control requests
excluded), and "kinds" the same count by kind (PUT, GET, LIST, HEAD,
DELETE, POST: what an S3 bill counts apart).
"""
import argparse
import http.client
import http.server
import json
import re
import sys
import threading
import time
import urllib.parse


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "pass"
        self.remaining = -1
        self.delay = 0.0
        self.skip = 0
        self.requests = 0
        self.kinds = {}

    def count(self, kind):
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def set(self, mode, count, delay, skip=0):
        with self.lock:
            self.mode, self.remaining, self.delay, self.skip = mode, count, delay, skip

    def take(self, is_copy=False):
        """The fault for one request, counting it down."""
        with self.lock:
            self.requests += 1
            mode, delay = self.mode, self.delay
            if mode in COPY_MODES and not is_copy:
                return "pass", 0.0
            if mode != "pass" and self.skip > 0:
                self.skip -= 1
                return "pass", 0.0
            if mode != "pass" and self.remaining > 0:
                self.remaining -= 1
                if self.remaining == 0:
                    self.mode, self.remaining = "pass", -1
            return mode, delay

    def snapshot(self):
        with self.lock:
            return {"mode": self.mode, "remaining": self.remaining, "requests": self.requests, "kinds": dict(self.kinds)}


COPY_MODES = {"copy-error"}
MODES = {"pass", "refuse", "delay", "status500", "slowdown", "truncate-get", "cut-listing"} | COPY_MODES
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def make_handler(upstream, state):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):
            pass

        def reply(self, status, body, headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def control(self):
            if self.command == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                    mode = request.get("mode", "pass")
                    if mode not in MODES:
                        raise ValueError("unknown mode %r" % mode)
                    state.set(mode, int(request.get("count", -1)), float(request.get("delay", 0)), int(request.get("skip", 0)))
                except (ValueError, TypeError) as error:
                    return self.reply(400, str(error).encode())
            self.reply(200, json.dumps(state.snapshot()).encode(), [("Content-Type", "application/json")])

        def handle_any(self):
            if self.path.startswith("/__fault__"):
                return self.control()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)
            is_listing = self.command == "GET" and query.get("list-type") == ["2"]
            state.count("LIST" if is_listing else self.command)
            is_copy = self.command == "PUT" and self.headers.get("x-amz-copy-source") is not None
            mode, delay = state.take(is_copy)
            if mode == "refuse":
                self.close_connection = True
                return
            if mode == "status500":
                return self.reply(500, b"<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>injected</Message></Error>")
            if mode == "slowdown":
                return self.reply(503, b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
            if mode == "copy-error":
                return self.reply(200, b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code><Message>injected: the copy failed after it started</Message></Error>",
                                  [("Content-Type", "application/xml")])
            if mode == "delay":
                time.sleep(delay)
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            connection.close()
            if mode == "truncate-get" and self.command == "GET" and not is_listing and response.status == 200 and len(data) > 1:
                data = data[: len(data) // 2]
            if mode == "cut-listing" and is_listing and response.status == 200:
                data = re.sub(rb"<IsTruncated>\w+</IsTruncated>", b"<IsTruncated>true</IsTruncated>", data)
                data = re.sub(rb"<NextContinuationToken>[^<]*</NextContinuationToken>", b"", data)
            headers = [(name, value) for name, value in response.getheaders()
                       if name.lower() not in HOP_BY_HOP and name.lower() != "content-length"]
            self.reply(response.status, data, headers)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the S3 server")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (127.0.0.1; 0.0.0.0 for clients in network namespaces, as scripts/fleet-chaos's nodes)")
    arguments = parser.parse_args()
    upstream = urllib.parse.urlsplit(arguments.upstream)
    if upstream.scheme != "http" or not upstream.hostname or not upstream.port:
        parser.error("--upstream must be http://host:port")
    server = http.server.ThreadingHTTPServer((arguments.host, arguments.port), make_handler(upstream, State()))
    server.daemon_threads = True
    print("s3-fault-proxy listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
