"""The sample server's nodes in fleet mode, for scripts/fleet-chaos and the
Benchmarks/fleet-*.sh scripts: starting, killing and stopping a node (inside
its network namespace through `scripts/fleet-env node-exec`), and HTTP
requests with plain http.client (no dependency beyond python3).

The network, PostgreSQL and HAProxy come from scripts/fleet-env, whose
state arrives in the environment: FLEET_NETWORK, FLEET_NS_PREFIX,
FLEET_PG_DIR, FLEET_PG_PORT, FLEET_PG_HOST, FLEET_WORK, FLEET_HAPROXY_URL,
PGPASSWORD (PostgreSQL's, which the nodes read), and FLEET_TLS_DIR when
nodes serve HTTPS (off loopback: fleet_tls_setup's CA and certificates).
"""
import http.client
import json
import math
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "Samples", "MultiTenantServer")
FLEET_ENV = os.path.join(ROOT, "scripts", "fleet-env")


def log(message):
    print(f"fleet: {message}", file=sys.stderr, flush=True)


def build_server(release):
    """The sample's executable: built (a no-op when up to date, as after
    scripts/test's loop for the debug build), then found in its bin path."""
    configuration = ["-c", "release"] if release else []
    log(f"building MultiTenantServer ({'release' if release else 'debug'})")
    subprocess.run(["swift", "build", "--package-path", SAMPLE, "--product", "MultiTenantServer"] + configuration,
                   check=True, stdout=sys.stderr)
    binary = subprocess.run(["swift", "build", "--package-path", SAMPLE, "--show-bin-path"] + configuration,
                            check=True, capture_output=True, text=True).stdout.strip()
    return os.path.join(binary, "MultiTenantServer")


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    @property
    def retry_after(self):
        return self.headers.get("retry-after")


def request(base, method, path, body=None, token=None, timeout=10.0, headers=None):
    """One request on a new connection to `base` (http://host:port).
    Raises OSError when no whole answer came (an answer cut short too)."""
    url = urllib.parse.urlsplit(base)
    if url.scheme == "https":
        # A node's certificate, checked against the fleet's CA (name included).
        context = ssl.create_default_context(cafile=os.path.join(os.environ["FLEET_TLS_DIR"], "ca.crt"))
        connection = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = f"Bearer {token}"
        if body is not None:
            sent["Content-Type"] = "application/json"
            body = json.dumps(body)
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        data = response.read().decode("utf-8", "replace")
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except http.client.HTTPException as error:
        # An answer cut short (a node killed mid-response: IncompleteRead)
        # is no answer: an OSError, as every caller expects, not an
        # exception that ends a writer's thread.
        raise ConnectionError(f"{method} {path}: {error!r}") from error
    finally:
        connection.close()


def fleet_env(*arguments, check=True):
    """Runs `scripts/fleet-env COMMAND …` (partition, heal, pg-restart…)."""
    return subprocess.run([FLEET_ENV, *map(str, arguments)], check=check, stdout=sys.stderr)


def network():
    return os.environ.get("FLEET_NETWORK", "loopback")


def node_host(index):
    return f"10.200.{index}.2" if network() == "netns" else "127.0.0.1"


class Node:
    """One server process of the fleet: node id n<index>, its data folder
    under `work`, started in a session of its own so that a kill takes its
    Litestream child with it (a machine that dies loses every process)."""

    def __init__(self, index, port, work, server, environment):
        self.index, self.port, self.server = index, port, server
        self.node_id = f"n{index}"
        self.host = node_host(index)
        self.tls = os.environ.get("FLEET_TLS_DIR")
        self.base = f"{'https' if self.tls else 'http'}://{self.host}:{port}"
        self.folder = os.path.join(work, f"node{index}")
        self.data = os.path.join(self.folder, "data")
        self.environment = environment
        self.process = None
        self.starts = 0

    def command(self, fleet_url, replica_store, acknowledge, restore, lease_seconds, encrypted_backup_seconds=None):
        command = [FLEET_ENV, "node-exec", str(self.index), self.server,
                   "--host", self.host, "--port", str(self.port), "--data", self.data]
        if self.tls:
            # Not loopback: the sample refuses plain HTTP there, between
            # nodes above all (tokens travel): HTTPS, the fleet's CA trusted.
            command += ["--tls-cert", os.path.join(self.tls, f"node{self.index}.crt"),
                        "--tls-key", os.path.join(self.tls, f"node{self.index}.key"),
                        "--fleet-ca-file", os.path.join(self.tls, "ca.crt")]
        elif network() == "netns":
            # A single server behind a proxy that terminates TLS.
            command.append("--behind-tls-proxy")
        if fleet_url is not None:
            command += ["--fleet", fleet_url, "--node-id", self.node_id, "--advertise", self.base,
                        "--replica-store", replica_store, "--acknowledge", acknowledge,
                        "--lease-seconds", str(lease_seconds), "--restore", restore]
            if encrypted_backup_seconds is not None:
                command += ["--encrypted-backup-seconds", str(encrypted_backup_seconds)]
        return command

    def start(self, fleet_url, replica_store, acknowledge="async", restore="eager", lease_seconds=2,
              encrypted_backup_seconds=None, wait=True):
        os.makedirs(self.data, exist_ok=True)
        self.starts += 1
        self.log_path = os.path.join(self.folder, f"server-{self.starts}.log")
        output = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command(fleet_url, replica_store, acknowledge, restore, lease_seconds,
                                                     encrypted_backup_seconds),
                                        env=self.environment, stdout=output, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        output.close()
        if wait:
            self.wait_listening()

    def log_tail(self, lines=30):
        """The log's last lines; for a crash, its fatal error and the
        frames of the sample's own code (the end of a backtrace only
        lists libraries)."""
        try:
            with open(self.log_path, "rb") as file:
                text = file.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        if any("Program crashed" in line for line in text):
            start = next(i for i, line in enumerate(text) if "Program crashed" in line)
            fatal = [line for line in text if "Fatal error" in line][:2]
            frames = [line.strip()[:240] for line in text[start:] if " in MultiTenantServer at /" in line and "/.build/" not in line and "compiler-generated" not in line][:8]
            return "\n".join(fatal + text[start:start + 2] + frames) + f"\n(log: {self.log_path})"
        return "\n".join(text[-lines:])

    def wait_listening(self, seconds=120):
        deadline = time.monotonic() + seconds
        pattern = re.compile(rb"listening on https?://")
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as file:
                if pattern.search(file.read()):
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.process.returncode} before listening:\n{self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} did not listen within {seconds} s:\n{self.log_tail()}")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def kill(self):
        """SIGKILL to the node's whole session and every process it
        started, as when its machine dies: the server and its Litestream
        (which runs in a session of its own, so outlives a kill of the
        server's alone: the server replaces such an orphan at its next
        start, but a deleted disk takes its socket, by which it is found)."""
        if self.process is None:
            return
        pids = descendants(self.process.pid)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        kill_all(pids)
        self.process.wait()

    def freeze(self):
        """SIGSTOP to the node and every process it started (its
        Litestream), as when its VM pauses: nothing runs, sockets stay
        open, and it wakes up (``thaw``) believing it still holds its
        lease."""
        self.frozen = [self.process.pid] + descendants(self.process.pid)
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass

    def thaw(self):
        """SIGCONT to what ``freeze`` stopped."""
        for pid in getattr(self, "frozen", []):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def stop(self, timeout=60):
        """SIGTERM (graceful: the node hands its tenants off and leaves);
        its exit status, or -9 when it had to be killed."""
        if not self.alive():
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = -9
        self.kill()   # whatever the session left (Litestream), if anything
        return status

    def wipe(self):
        shutil.rmtree(self.data, ignore_errors=True)


def postgres_kill(folder):
    """SIGKILL to the PostgreSQL cluster in `folder` (scripts/postgres's
    DIR: FLEET_PG_DIR for the fleet's) as when its
    machine dies: the postmaster and every backend and auxiliary process
    (pg_ctl starts the postmaster in a session of its own, so its process
    group is the whole cluster; its descendants are killed too, should one
    have left the group). Nothing is flushed or shut down: the next start
    runs crash recovery. Returns how many processes were killed, once none
    of them exists any more (zombies reaped: the cluster can start again)."""
    with open(os.path.join(folder, "data", "postmaster.pid")) as file:
        postmaster = int(file.readline())
    pids = [postmaster] + descendants(postmaster)
    try:
        # Only the postmaster's own group: never a group it merely joined
        # (ours, had it not been started by pg_ctl).
        if os.getpgid(postmaster) == postmaster:
            os.killpg(postmaster, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kill_all(pids)
    deadline = time.monotonic() + 10
    while any(process_exists(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"PostgreSQL processes {[pid for pid in pids if process_exists(pid)]} still exist 10 s after SIGKILL")
        time.sleep(0.01)
    return len(pids)


def process_exists(pid):
    """Whether process `pid` still exists, as a zombie too: the cluster's
    processes are not our children, and until whoever inherited them
    reaps the postmaster, a new one refuses to start (its postmaster.pid
    names a pid that answers signals)."""
    return os.path.exists(f"/proc/{pid}")


class ReadOnlyFolder:
    """A folder that every node writes to (the replica store), made
    read-only for all of them at once and writable again: a bind mount of
    the folder on itself (``mount``, before the nodes start), remounted
    read-only (``mount -o remount,bind,ro``) in every mount namespace the
    given processes run in, and in ours. ``ip netns exec`` gives each node
    a copy of our mount namespace, which a remount here does not reach, so
    the remount runs in each (``nsenter --mount``). A write there then
    fails at once (EROFS), as with a store that refuses writes; nothing
    hangs. Needs root (CAP_SYS_ADMIN)."""

    def __init__(self, folder):
        self.folder = folder
        self.mounted = False

    def mount(self):
        subprocess.run(["mount", "--bind", self.folder, self.folder], check=True, capture_output=True, text=True)
        self.mounted = True

    def unmount(self):
        """Back to a plain folder (rw first: a folder left read-only
        could not be deleted at the end)."""
        if not self.mounted:
            return
        subprocess.run(["mount", "-o", "remount,bind,rw", self.folder], capture_output=True)
        if subprocess.run(["umount", self.folder], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", self.folder], capture_output=True)
        self.mounted = False

    def namespaces(self, pids):
        """One pid per mount namespace among `pids` and ours."""
        found = {}
        for pid in [os.getpid()] + list(pids):
            try:
                found.setdefault(os.readlink(f"/proc/{pid}/ns/mnt"), pid)
            except OSError:
                pass   # exited meanwhile
        return found

    def set_read_only(self, read_only, pids, seconds=10):
        """Remounts the folder read-only (or read-write) in the mount
        namespace of each of `pids` and in ours; returns how many
        namespaces. A remount read-only is refused (EBUSY) while a file
        there is open for writing (Litestream writing a file): tried again
        until it passes, `seconds` at most."""
        namespaces = self.namespaces(pids)
        option = "remount,bind,ro" if read_only else "remount,bind,rw"
        for pid in namespaces.values():
            deadline = time.monotonic() + seconds
            while True:
                result = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", "mount", "-o", option, self.folder],
                                        capture_output=True, text=True)
                if result.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mount -o {option} {self.folder} in the mount namespace of {pid}: {result.stderr.strip()}")
                time.sleep(0.01)
        return len(namespaces)

    def writable_in(self, pids):
        """How many of the mount namespaces of `pids` (and ours) can
        create a file in the folder: what each node sees, checked."""
        probe = os.path.join(self.folder, f".writable-probe-{os.getpid()}")
        writable = 0
        for pid in self.namespaces(pids).values():
            result = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", "sh", "-c", f': > "{probe}" && rm -f "{probe}"'],
                                    capture_output=True)
            writable += result.returncode == 0
        return writable


def kill_all(pids):
    """SIGKILL to each of `pids`, those already gone skipped."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def descendants(pid):
    """Every process under `pid` (from /proc), children first found."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        # pid (comm) state ppid …: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def percentile(values, fraction):
    """Nearest-rank percentile of `values` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class S3Store:
    """The fleet's replica store as an S3-compatible bucket: a moto_server
    of the venv (scripts/bootstrap installs it) that checks every
    request's SigV4 signature against an IAM user's key made at start, and
    scripts/s3-fault-proxy.py in front of it, through which every node and
    its Litestream reach the store, so that a scenario can make the store
    unreachable (``set_fault("refuse")``) and count the requests.

    The proxy listens on every address: a node in a network namespace
    reaches it at its veth's host end (10.200.<i>.1), not at PostgreSQL's
    address, so a partition from PostgreSQL leaves the store reachable;
    moto listens on loopback only.
    Nothing here looks for a public endpoint or the instance metadata
    service: every client has the endpoint, a region and keys."""

    BUCKET = "replicas"
    REGION = "us-east-1"

    def __init__(self, work, venv):
        self.work, self.venv = work, venv
        self.processes = []
        self.moto_port = self.proxy_port = None
        self.access_key = self.secret_key = None

    def start(self):
        os.makedirs(self.work, exist_ok=True)
        python = os.path.join(self.venv, "bin", "python")
        moto = os.path.join(self.venv, "bin", "moto_server")
        if not os.access(moto, os.X_OK):
            raise RuntimeError(f"{moto} is missing: run scripts/bootstrap")
        self.moto_port = free_port()
        # The setup's requests (user, key, policy, bucket) are unsigned;
        # moto checks the signature of every later one.
        environment = dict(os.environ, AWS_EC2_METADATA_DISABLED="true", INITIAL_NO_AUTH_ACTION_COUNT="4")
        with open(os.path.join(self.work, "moto.log"), "wb") as output:
            self.processes.append(subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(self.moto_port)], env=environment,
                                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True))
        setup = subprocess.run([python, os.path.join(ROOT, "scripts", "moto-setup.py"), f"http://127.0.0.1:{self.moto_port}", "fleet", self.BUCKET],
                               capture_output=True, text=True, env=dict(os.environ, AWS_EC2_METADATA_DISABLED="true"))
        words = setup.stdout.split()
        if setup.returncode != 0 or len(words) < 2:
            self.stop()
            raise RuntimeError(f"moto_server setup failed: {setup.stdout[-500:]} {setup.stderr[-1500:]}")
        self.access_key, self.secret_key = words[-2], words[-1]
        log_path = os.path.join(self.work, "s3-fault-proxy.log")
        with open(log_path, "wb") as output:
            self.processes.append(subprocess.Popen(
                [python, os.path.join(ROOT, "scripts", "s3-fault-proxy.py"), "--upstream", f"http://127.0.0.1:{self.moto_port}",
                 "--host", "0.0.0.0"], stdout=output, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 30
        while self.proxy_port is None:
            with open(log_path, "rb") as file:
                found = re.search(rb"listening on (\d+)", file.read())
            if found:
                self.proxy_port = int(found.group(1))
            elif time.monotonic() > deadline or self.processes[-1].poll() is not None:
                self.stop()
                raise RuntimeError("s3-fault-proxy did not start")
            else:
                time.sleep(0.05)

    def url(self, name):
        """The store's URL for --replica-store: s3://replicas/<name>."""
        return f"s3://{self.BUCKET}/{name}"

    def environment(self, host):
        """What every S3 client of a node reaching the store from `host`'s
        side needs: the standard variables, the proxy as endpoint."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.REGION, "AWS_ENDPOINT_URL": f"http://{host}:{self.proxy_port}",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def set_fault(self, mode):
        """The proxy's mode for every request from now on ("pass",
        "refuse"…); returns its state (requests seen, by kind)."""
        response = request(f"http://127.0.0.1:{self.proxy_port}", "POST", "/__fault__", body={"mode": mode, "count": -1})
        if response.status != 200:
            raise RuntimeError(f"s3-fault-proxy refused mode {mode}: {response.status} {response.body[:200]}")
        return response.json()

    def state(self):
        return request(f"http://127.0.0.1:{self.proxy_port}", "GET", "/__fault__").json()

    def objects(self, prefix=""):
        """The keys under `prefix` in the bucket (moto directly)."""
        listing = subprocess.run([os.path.join(self.venv, "bin", "python"), "-c", self.LIST,
                                  f"http://127.0.0.1:{self.moto_port}", self.BUCKET, prefix, self.access_key, self.secret_key],
                                 capture_output=True, text=True, check=True)
        return listing.stdout.split()

    def stop(self):
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        self.processes = []

    LIST = """
import boto3, sys
endpoint, bucket, prefix, key, secret = sys.argv[1:6]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret)
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    for item in page.get("Contents", []):
        print(item["Key"])
"""


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_gateway(index):
    """The address node `index` reaches the host at: its veth's host end
    in a network namespace, else loopback."""
    return f"10.200.{index}.1" if network() == "netns" else "127.0.0.1"
