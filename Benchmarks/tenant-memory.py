#!/usr/bin/env python3
"""Memory per open tenant of the sample server (issue 26).

Creates TENANTS tenants (one player each), restarts the server so that none
is open, and reads its resident set size (VmRSS) idle, then after one read
of each of the first OPEN tenants, then after one read of every tenant: the
directory keeps at most maxOpen open (the LRU closes the others), so the
last figures must stay near the second (two more rounds over every
tenant check that the memory levels off).

Usage: Benchmarks/tenant-memory.py BINARY [tenants=1000] [open=256] [rounds=6]
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
tenants = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
opened = int(sys.argv[3]) if len(sys.argv) > 3 else 256
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 6
token = "memory-operator-token-" + os.urandom(16).hex()
data = tempfile.mkdtemp(prefix="tenant-memory-")


def start():
    server = subprocess.Popen([binary, "--port", "0", "--data", data], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, MTS_OPERATOR_TOKEN=token), text=True)
    for line in server.stdout:
        if line.startswith("listening on http://"):
            port = int(line.strip().rsplit(":", 1)[1])
            break
    else:
        sys.exit("the server did not start")
    import threading
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
    return server, http.client.HTTPConnection("127.0.0.1", port)


def call(connection, method, path, body=None, bearer=None):
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    connection.request(method, path, json.dumps(body) if body is not None else None, headers)
    response = connection.getresponse()
    return response.status, response.read()


def rss(server):
    with open(f"/proc/{server.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_tenants(connection):
    return json.loads(call(connection, "GET", "/health/ready")[1])["openTenants"]


def stop(server):
    server.terminate()
    server.wait(60)


server, connection = start()
tokens = []
for index in range(tenants):
    status, body = call(connection, "POST", "/tenants", {"id": f"m{index}"}, token)
    assert status == 201, body
    tokens.append(json.loads(body)["token"])
    status, body = call(connection, "POST", f"/tenants/m{index}/players", {"name": "P", "score": index}, tokens[-1])
    assert status == 201, body
stop(server)

server, connection = start()
time.sleep(2)
idle = rss(server)
for index in range(opened):
    assert call(connection, "GET", f"/tenants/m{index}/players", bearer=tokens[index])[0] == 200
time.sleep(1)
some = rss(server)
some_open = open_tenants(connection)
for index in range(tenants):
    assert call(connection, "GET", f"/tenants/m{index}/players", bearer=tokens[index])[0] == 200
time.sleep(1)
every = rss(server)
every_open = open_tenants(connection)
# More rounds over every tenant (each opens and closes 1000 - maxOpen
# tenants): bounded memory levels off.
rounds = []
for _ in range(ROUNDS):
    for index in range(tenants):
        assert call(connection, "GET", f"/tenants/m{index}/players", bearer=tokens[index])[0] == 200
    rounds.append(rss(server))
ready = json.loads(call(connection, "GET", "/health/ready")[1])
stop(server)
shutil.rmtree(data, ignore_errors=True)

per_tenant = (some - idle) / max(1, some_open) * 1024
print(f"tenant memory: {tenants} tenants; idle {idle:.1f} MB; after reading {opened}: {some:.1f} MB with {some_open} open "
      f"({per_tenant:.0f} KB per open tenant); after reading all {tenants}: {every:.1f} MB with {every_open} open "
      f"(maxOpen {ready.get('fileDescriptors', {}).get('maxOpen')}); after each of {ROUNDS} more rounds over all: "
      + ", ".join(f"{value:.1f}" for value in rounds) + " MB")
