#!/usr/bin/env python3
"""The fleet's chaos campaign (issue 24, item 8); run by scripts/fleet-chaos,
which prepares the network, PostgreSQL and HAProxy (scripts/fleet-env) and
passes them in the environment.

For each acknowledgement mode (durable, async, or both, one after the
other on a fresh database, fresh data folders and a fresh replica store:
a folder every node shares, or with --store s3 a bucket of a moto_server
(S3-compatible, checking every request's signature) that nodes and their
Litestream reach through scripts/s3-fault-proxy.py, with the standard
AWS_* variables):
three sample servers in fleet mode behind HAProxy, T tenants (every fifth
encrypted) created through HAProxy, W writer threads posting
`{"name": "w<writer>-<seq>", "score": <seq>}` to random tenants through
HAProxy and recording every acknowledged write (201: its player id, name,
and when the request started and ended), and these scenarios under load:

  kill       SIGKILL a node's whole session (server + Litestream), delete its
             data folder; every tenant it owned must take a write again within
             the bound (failover = SIGKILL to that tenant's first write
             acknowledged after it). Then the node restarts empty (rejoin) and
             takes its share back.
  partition  (netns) cut a node from PostgreSQL while clients still reach it:
             it must stop acknowledging writes (direct probes) before any of
             its tenants shows another owner. On loopback: PostgreSQL stopped
             for every node for lease + 1 s, after which nothing may be
             acknowledged until it is back.
  pgrestart  PostgreSQL restarted (fast shutdown, 1 s down).
  move       POST /fleet/tenants/:id/move to another node (through HAProxy).
  drain      POST /fleet/nodes/:node/drain: the node's tenants move away.
  freeze     SIGSTOP a node and its children (its Litestream) for three
             leases under writers, as a paused VM would be, then SIGCONT: it
             wakes up believing it holds its tenants, which others claimed
             meanwhile; no write it commits before or after may be
             acknowledged unless the tenant's owner has it.
  freezemove POST /fleet/tenants/:id/move, and freeze the tenant's owner in
             the middle of the hand-off (three leases), then SIGCONT.
  pgkill     SIGKILL to PostgreSQL's postmaster and every backend (its whole
             process group), restarted --pg-down-seconds later (crash
             recovery, checked in its log): in durable mode no write may be
             acknowledged while it is dead (its change can't reach the tail:
             503), in async mode none after the leases lapsed; then every
             tenant takes a write again.
  appendkill (durable mode) a node dies at the durable tail's fault point:
             its next durable write kills it (SIGKILL, by itself) after the
             transaction committed on its disk and before the change reached
             the tail (MTS_FAULT_KILL_BEFORE_TAIL_APPEND). That write is never
             answered; the node's tenants fail over within the bound and are
             restored from the replica plus the tail without a gap, though
             its disk, kept, holds a commit the tail lacks; then it restarts
             with that disk and takes its share back.
  storedown  The replica store down for --store-down-seconds: a folder
             read-only (EROFS: a bind mount remounted read-only in every
             node's mount namespace, checked from each); a bucket (--store
             s3) unreachable, every request's connection closed unanswered
             by the fault proxy in front of moto_server. Meanwhile durable
             writes go on through the tail, which grows (tail_rows_*; a
             refusal, the tail's bound included,
             is a detail, not a failure); 0.5 s after the store is back, the
             node owning the most tenants among those with an encrypted one
             is killed as in `kill` (failover bound): its tenants are
             restored from lagging replicas plus the tail. In async mode the
             writes it acknowledged from the outage on are lost, counted
             (lost_acknowledged_during_store_outage), not held to the loss
             window. With --tail-burst N (durable mode), 16 more writers
             write to one tenant of the node to be killed (its encrypted
             one, if any) and the outage lasts until fleet_tail holds N of
             that tenant's changes: its failover replays them
             (details.storedown[].tail_burst, failover_seconds).

Checks, at the end of each mode, against what every tenant holds (read over
HTTP): an acknowledged write missing or holding another name is lost; a
tenant "forks" when a write acknowledged in the surviving history had
returned before a write that the surviving history lacks was even sent
(two histories took writes at the same time); a failed request (not a
201, or no answer) counts against the run unless a scenario concerned its
tenant at that time, or it is the documented `503` + `Retry-After` of a
freeze, or it was in flight through a node at the instant that node was
killed. One JSON object on stdout; exit status 1 when durable mode lost an
acknowledged write, any tenant forked, a failover took longer than the
bound, a partitioned node acknowledged a write after its tenants were
claimed, or a request failed on an unaffected tenant, or a scenario could
not do what it says (listed under "problems").
"""
import argparse
import concurrent.futures
import glob
import itertools
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleetlib import (Node, ReadOnlyFolder, S3Store, build_server, descendants, fleet_env, log, network,  # noqa: E402
                      node_gateway, percentile, postgres_kill, request, ROOT)

SCENARIOS = ["kill", "partition", "pgrestart", "move", "drain", "freeze", "freezemove", "pgkill", "appendkill", "storedown"]


class Ack:
    __slots__ = ("id", "name", "start", "end", "via")

    def __init__(self, id, name, start, end, via):
        self.id, self.name, self.start, self.end, self.via = id, name, start, end, via


def analyze(acks, held):
    """What one tenant's acknowledged writes say against what it holds
    (`held`: player id -> name): (the acknowledged writes it lacks, how
    many of those lost their id to another write, whether it forked).

    A write is lost when its id is absent or holds another name. The
    tenant forked when two histories took writes at the same time: a
    write the surviving history holds, at or past a lost write's id, had
    been acknowledged before the lost one was even sent. A lost write
    followed by a reuse of its id, with no such overlap, is a loss (an
    asynchronous failover's), not a fork."""
    missing = [ack for ack in acks if held.get(ack.id) != ack.name]
    surviving = [ack for ack in acks if held.get(ack.id) == ack.name]
    reused = sum(1 for ack in missing if ack.id in held)
    fork = any(b.id >= a.id and b.end < a.start for a in missing for b in surviving)
    return missing, reused, fork


def loss_age(ack, events):
    """How old acknowledged write `ack` was when the event that lost it
    happened, or None when no event came after it. `events` holds each
    event's loss instant. The event that lost it is the first
    whose loss instant came at or after the write was sent (an answer read
    a hair after a SIGKILL's instant was lost by that kill, not by the
    next event); the age runs from its answer to that instant, when a new
    owner read the replica. For a kill it
    is the kill; for a partition, the claim: the cut-off node acknowledges
    writes until its fence closes, and those are in the replica unless
    Litestream had not uploaded them when the survivor claimed the tenant."""
    later = [loss_at for loss_at in events if loss_at >= ack.start]
    if not later:
        return None
    return max(0.0, min(later) - ack.end)


def in_flight_during(ack, spans):
    """Whether write `ack` was in flight, or answered, within one of
    `spans` ((from, to) instants): a write answered during a store outage
    or sent before it and answered during it."""
    return any(start <= ack.end and ack.start <= end for start, end in spans)


class Window:
    """A time when a scenario concerned `tenants` (None: every tenant);
    `allowed` is "any" failure, or only the documented "retry_after" 503.
    `loss_at` is when writes acknowledged before it may be lost (see
    ``loss_age``): its start unless the scenario says later."""

    def __init__(self, kind, tenants, allowed, start):
        self.kind, self.tenants, self.allowed, self.start, self.end = kind, tenants, allowed, start, None
        self.loss_at = start
        self.failures = 0          # the failed requests it covered
        self.failure_examples = []

    def covers(self, tenant, start, end, retry_after):
        if self.tenants is not None and tenant not in self.tenants:
            return False
        if start > (self.end if self.end is not None else float("inf")) or end < self.start:
            return False
        return self.allowed == "any" or retry_after


def count_in(path, text):
    """How many times `text` appears in file `path`, case ignored (0 when
    unreadable)."""
    try:
        with open(path, "rb") as file:
            return file.read().lower().count(text.lower().encode())
    except OSError:
        return 0


class Campaign:
    FAULT_TRIGGER = "kill-before-tail-append"

    def __init__(self, arguments, mode, server, ports, database_url, haproxy):
        self.arguments, self.mode, self.server, self.haproxy = arguments, mode, server, haproxy
        self.work = os.path.join(os.environ["FLEET_WORK"], f"chaos-{mode}")
        os.makedirs(self.work, exist_ok=True)
        # The replica store: a folder every node shares, or (--store s3) a
        # bucket of a moto_server behind scripts/s3-fault-proxy.py.
        self.s3 = None
        if arguments.store == "s3":
            self.s3 = S3Store(os.path.join(self.work, "s3"), os.path.join(ROOT, ".build-venv"))
            self.s3.start()
            self.store = self.s3.url(f"fleet-{mode}")
        else:
            self.store = os.path.join(self.work, "replicas")
            os.makedirs(self.store, exist_ok=True)
        self.database_url = database_url
        self.operator = secrets.token_hex(24)
        # The fleet secret: every node signs its row and its forwards with it.
        environment = dict(os.environ, MTS_OPERATOR_TOKEN=self.operator, MTS_MASTER_KEY=secrets.token_hex(32),
                           MTS_FLEET_SECRET=secrets.token_hex(32),
                           MTS_MAX_PLAYERS="10000000",
                           # Every node may end up holding every tenant.
                           MTS_MAX_OPEN_TENANTS=str(max(256, arguments.tenants)),
                           # The fault point of appendkill: armed per node by
                           # this file in its data folder.
                           MTS_FAULT_KILL_BEFORE_TAIL_APPEND=self.FAULT_TRIGGER,
                           PATH=os.path.join(ROOT, ".build-venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
        self.nodes = [Node(index, port, self.work, server,
                           dict(environment, **self.s3.environment(node_gateway(index))) if self.s3 else environment)
                      for index, port in enumerate(ports, start=1)]
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.acks = {}             # tenant -> [Ack]
        self.tokens = {}
        self.encrypted = {}
        self.windows = []
        self.kills = []            # [before, after] monotonic instants of each SIGKILL (after: None while it runs)
        self.failures = []         # unexpected: (tenant, detail)
        self.expected_failures = 0
        self.retry_after = 0
        self.freeze_503 = 0          # 503 + Retry-After of a rebalancing move's freeze
        self.cut_by_kill = 0
        self.requests = 0
        self.details = {kind: [] for kind in SCENARIOS}
        self.problems = []
        self.tail_rows_max = None   # durable mode: the most changes one tenant had in fleet_tail, sampled each second
        self.tail_samples = []      # (monotonic instant, that most) of each sample
        self.store_outages = []     # (from, to): storedown, from the store's fall to the kill after it
        # The replica store, made read-only for every node by storedown:
        # bound on itself before any node starts (see ReadOnlyFolder); a
        # bucket's proxy refuses every request instead.
        self.store_fault = ReadOnlyFolder(self.store) if self.s3 is None else None
        self.store_fault_error = None
        if "storedown" in arguments.scenarios and self.store_fault is not None:
            try:
                self.store_fault.mount()
            except (OSError, subprocess.CalledProcessError) as error:   # not root: storedown says so when it runs
                self.store_fault_error = f"mount --bind {self.store} on itself failed (root needed): {getattr(error, 'stderr', '') or error}"
        # Nodes drained by a scenario: they stay draining, and take no tenant.
        self.drained = set()
        self.failover = []         # seconds, per tenant of a killed node
        self.partition_failover = []

    # ------------------------------------------------------------ nodes

    def start_node(self, node, attempts=1):
        """Starts `node`; with attempts > 1, tries again a second later when
        it exits before listening (a rejoin that PostgreSQL still sees as
        the dead process's, until that lease lapses)."""
        for attempt in range(attempts):
            try:
                return node.start(self.database_url, self.store, self.mode, self.arguments.restore, self.arguments.lease,
                                  self.arguments.encrypted_backup_seconds)
            except RuntimeError as error:
                if attempt == attempts - 1 or node.alive():
                    raise
                log(f"{self.mode}: {node.node_id} did not start ({str(error).splitlines()[0]}), again in 1 s")
                time.sleep(1)

    def wait_ready(self, node, seconds=60):
        deadline = time.monotonic() + seconds
        last = None
        while time.monotonic() < deadline:
            try:
                response = request(node.base, "GET", "/health/ready", timeout=2)
                last = f"{response.status} {response.body[:300]}"
                if response.status == 200:
                    return response.json()
            except (OSError, ValueError) as error:
                last = repr(error)
            time.sleep(0.1)
        raise RuntimeError(f"{node.node_id} not ready within {seconds} s (last answer: {last}):\n{node.log_tail()}")

    def live_nodes(self):
        return [node for node in self.nodes if node.alive()]

    def placement(self, base=None):
        """tenant -> (owner, epoch), from any live node (or `base`)."""
        bases = [base] if base else [self.haproxy] + [node.base for node in self.live_nodes()]
        last = None
        for url in bases:
            try:
                response = request(url, "GET", "/fleet/placement", token=self.operator, timeout=5)
                if response.status == 200:
                    return {row["tenant"]: (row.get("owner"), row.get("epoch")) for row in response.json()}
                last = f"{response.status} {response.body[:200]}"
            except (OSError, ValueError) as error:
                last = repr(error)
        raise RuntimeError(f"GET /fleet/placement failed: {last}")

    # ------------------------------------------------------------- load

    def record_failure(self, tenant, start, end, status, retry_after, detail):
        with self.lock:
            if retry_after and status == 503:
                self.retry_after += 1
            # In flight while the node died: the kill (the /proc scan for
            # the node's processes, then the signals) spans a few ms.
            if any(start <= (after or float("inf")) and before <= end for before, after in self.kills) and status in (None, 502, 503, 504):
                self.cut_by_kill += 1
                return
            covering = [window for window in self.windows if window.covers(tenant, start, end, status == 503 and retry_after)]
            if covering:
                self.expected_failures += 1
                covering[0].failures += 1
                if len(covering[0].failure_examples) < 3:
                    covering[0].failure_examples.append(f"{tenant} at {start - self.started:.2f} s: {status} {detail[:160]}")
                return
            # The documented 503 + Retry-After of a move's freeze, on a
            # tenant the fleet moves by itself (rebalancing after a join,
            # an operator's move or a drain): the tenant is affected by a
            # move, outside any window this script opened.
            if status == 503 and retry_after and "is moving" in detail:
                self.freeze_503 += 1
                return
            open_windows = [window.kind for window in self.windows if window.covers(tenant, start, end, True)]
            self.failures.append((tenant, f"at {start - self.started:.2f}-{end - self.started:.2f} s "
                                          f"(windows: {','.join(open_windows) or 'none'}): {status} {detail}"[:400]))

    def write(self, tenant, name, score, base=None, timeout=30):
        """One write; returns the Ack or None."""
        start = time.monotonic()
        status, retry_after, detail, ack = None, False, "", None
        try:
            response = request(base or self.haproxy, "POST", f"/tenants/{tenant}/players",
                               {"name": name, "score": score}, self.tokens[tenant], timeout=timeout)
            status, retry_after, detail = response.status, response.retry_after is not None, response.body[:200]
            if response.status == 201:
                ack = Ack(response.json()["id"], name, start, time.monotonic(), base or "haproxy")
        except (OSError, ValueError) as error:
            detail = repr(error)
        end = time.monotonic()
        with self.lock:
            self.requests += 1
            if ack is not None:
                self.acks.setdefault(tenant, []).append(ack)
        if ack is None and base is None:
            self.record_failure(tenant, start, end, status, retry_after, detail)
        return ack

    def writer(self, number, stop):
        generator = random.Random(f"{self.arguments.seed}-{self.mode}-{number}")
        tenants = sorted(self.tokens)
        sequence = 0
        while not stop.is_set():
            sequence += 1
            tenant = tenants[generator.randrange(len(tenants))]
            if self.write(tenant, f"w{number}-{sequence}", sequence) is None:
                time.sleep(0.02)

    def first_ack_after(self, tenant, instant):
        with self.lock:
            ends = [ack.end for ack in self.acks.get(tenant, []) if ack.start >= instant]
        return min(ends) if ends else None

    def wait_writable(self, tenants, since, bound, label):
        """Writes to each of `tenants` (probers beside the writers, up to 32
        at once, each on its own tenants: one slow tenant never delays the
        measure of another) until each has a write acknowledged that was
        sent after `since`; returns tenant -> seconds from `since` (None:
        not within 3 x bound)."""
        deadline = since + max(3 * bound, 15)
        numbers = itertools.count(1)
        number_lock = threading.Lock()

        def probe(tenant):
            while time.monotonic() < deadline and self.first_ack_after(tenant, since) is None:
                with number_lock:
                    number = next(numbers)
                if self.write(tenant, f"p-{label}-{number}", number, timeout=10) is None:
                    time.sleep(0.01)

        if tenants:
            with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(tenants))) as probers:
                list(probers.map(probe, sorted(tenants)))
        return {tenant: (None if (end := self.first_ack_after(tenant, since)) is None else end - since)
                for tenant in tenants}

    def open_window(self, kind, tenants, allowed):
        window = Window(kind, None if tenants is None else set(tenants), allowed, time.monotonic())
        with self.lock:
            self.windows.append(window)
        return window

    def settle(self, label, seconds=30):
        """Waits until the placement stops changing (2 s unchanged), under a
        window that allows the documented 503 of a freeze on every tenant
        (a joining node takes its share, tenants move)."""
        window = self.open_window(f"{label}-rebalance", None, "retry_after")
        deadline = time.monotonic() + seconds
        previous, stable_since = None, time.monotonic()
        while time.monotonic() < deadline:
            current = {tenant: owner for tenant, (owner, _) in self.placement().items()}
            if current != previous:
                previous, stable_since = current, time.monotonic()
            elif time.monotonic() - stable_since >= 2:
                break
            time.sleep(0.25)
        window.end = time.monotonic()
        return previous or {}

    # -------------------------------------------------------- scenarios

    def owned_by(self, node_id):
        return sorted(tenant for tenant, (owner, _) in self.placement().items() if owner == node_id and tenant in self.tokens)

    def victim(self, number):
        """The live node that owns the most tenants (the scenario's number breaks ties),
        so that every kill, partition and drain concerns tenants."""
        if len(self.live_nodes()) < 2:
            raise RuntimeError(f"only {[node.node_id for node in self.live_nodes()]} alive: no node to spare")
        counts = {}
        for owner, _ in self.placement().values():
            counts[owner] = counts.get(owner, 0) + 1
        candidates = self.live_nodes()
        return max(candidates, key=lambda node: (counts.get(node.node_id, 0), -((node.index - number) % len(candidates))))

    def encrypted_owner(self, number):
        """The live node owning the most tenants among those that own an
        encrypted one (the victim when none does), so that a failover
        replays the tail of both kinds of tenant."""
        placement = self.placement()
        owners = {owner for tenant, (owner, _) in placement.items() if self.encrypted.get(tenant)}
        candidates = [node for node in self.live_nodes() if node.node_id in owners]
        if not candidates or len(self.live_nodes()) < 2:
            return self.victim(number)
        counts = {}
        for owner, _ in placement.values():
            counts[owner] = counts.get(owner, 0) + 1
        return max(candidates, key=lambda node: (counts.get(node.node_id, 0), -node.index))

    def scenario_kill(self, number):
        self.details["kill"].append(self.kill_node(self.victim(number), number))

    def kill_node(self, node, number, label="kill"):
        """SIGKILL of `node` with its disk deleted, the failover of its
        tenants (counted against the bound), then its empty rejoin;
        returns the figures. `label`: the scenario, in what it says."""
        tenants = self.owned_by(node.node_id)
        window = self.open_window("kill", tenants, "any")
        instant = time.monotonic()
        kill = [instant, None]
        with self.lock:
            self.kills.append(kill)
        node.kill()
        with self.lock:
            kill[1] = time.monotonic()
        node.wipe()
        times = self.wait_writable(tenants, instant, self.arguments.bound, f"{label}-kill{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        self.failover.extend(times.values())
        if len(recovered) < len(tenants):
            self.problems.append(f"{label} {number}: {len(tenants) - len(recovered)} of {node.node_id}'s tenants not writable "
                                 f"within {max(3 * self.arguments.bound, 15)} s: {sorted(t for t, s in times.items() if s is None)}")
        # Rejoin: the same node id, an empty disk; it must take a share.
        rejoin_started = time.monotonic()
        self.start_node(node, attempts=int(3 * self.arguments.lease) + 1)
        self.wait_ready(node)
        owners = self.settle(f"{label}-kill{number}")
        share = sum(1 for owner in owners.values() if owner == node.node_id)
        plain = [seconds for tenant, seconds in times.items() if seconds is not None and not self.encrypted[tenant]]
        encrypted = [seconds for tenant, seconds in times.items() if seconds is not None and self.encrypted[tenant]]
        return {
            "node": node.node_id, "tenants": len(tenants),
            "failover_seconds_max": round(max(recovered), 3) if recovered else None,
            "failover_seconds_max_plain": round(max(plain), 3) if plain else None,
            "failover_seconds_max_encrypted": round(max(encrypted), 3) if encrypted else None,
            "not_writable_again": len(tenants) - len(recovered),
            "failover_seconds_by_tenant": {tenant: (None if seconds is None else round(seconds, 3)) for tenant, seconds in times.items()},
            "rejoin_seconds": round(time.monotonic() - rejoin_started, 2), "tenants_after_rejoin": share}

    def scenario_appendkill(self, number):
        if self.mode != "durable":
            self.details["appendkill"].append({"skipped": "no durable tail in async mode"})
            return
        node = self.encrypted_owner(number)
        tenants = self.owned_by(node.node_id)
        window = self.open_window("appendkill", tenants, "any")
        trigger = os.path.join(node.data, self.FAULT_TRIGGER)
        instant = time.monotonic()
        kill = [instant, None]
        with self.lock:
            self.kills.append(kill)
        with open(trigger, "w"):
            pass
        # The writers write to its tenants all the time: the next durable
        # write it takes is the one that dies.
        deadline = instant + 30
        while node.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        died = not node.alive()
        os.remove(trigger)
        with self.lock:
            kill[1] = time.monotonic()
        status = node.process.returncode if died else None
        node.kill()   # its Litestream, in a session of its own, as after a crash
        if not died:
            self.problems.append(f"appendkill {number}: {node.node_id} took no durable write within 30 s of its fault point being armed")
        elif status != -signal.SIGKILL:
            # Nothing else sends it SIGKILL meanwhile: only its fault point.
            self.problems.append(f"appendkill {number}: {node.node_id} exited with {status}, not at its fault point:\n{node.log_tail(10)}")
        times = self.wait_writable(tenants, instant, self.arguments.bound, f"appendkill{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        self.failover.extend(times.values())
        if len(recovered) < len(tenants):
            self.problems.append(f"appendkill {number}: {len(tenants) - len(recovered)} of {node.node_id}'s tenants not writable "
                                 f"within {max(3 * self.arguments.bound, 15)} s: {sorted(t for t, s in times.items() if s is None)}")
        # Back with the disk it died with.
        self.start_node(node, attempts=int(3 * self.arguments.lease) + 1)
        self.wait_ready(node)
        owners = self.settle(f"appendkill{number}")
        self.details["appendkill"].append({
            "node": node.node_id, "tenants": len(tenants), "died_at_fault_point": died and status == -signal.SIGKILL,
            "seconds_to_die": None if not died else round(kill[1] - instant, 3),
            "failover_seconds_max": round(max(recovered), 3) if recovered else None,
            "tenants_after_restart": sum(1 for owner in owners.values() if owner == node.node_id)})

    def scenario_partition(self, number):
        if network() != "netns":
            return self.scenario_postgres_outage(number)
        node = self.victim(number)
        others = [other for other in self.live_nodes() if other is not node]
        tenants = self.owned_by(node.node_id)
        window = self.open_window("partition", tenants, "any")
        instant = time.monotonic()
        fleet_env("partition", node.index)
        # Direct writes to the partitioned node (for its own tenants) and
        # the placement seen from another node, side by side.
        last_direct_ack, claimed_at, zombie_acks, probe, lease_invalid_at = None, None, 0, 0, None
        deadline = instant + max(3 * self.arguments.bound, 15)
        while time.monotonic() < deadline and tenants:
            tenant = tenants[probe % len(tenants)]
            probe += 1
            ack = self.write(tenant, f"z-{number}-{probe}", probe, base=node.base, timeout=3)
            if lease_invalid_at is None:
                try:
                    fleet = request(node.base, "GET", "/health/ready", timeout=2).json().get("fleet") or {}
                    if fleet.get("leaseValid") is False:
                        lease_invalid_at = time.monotonic()
                except (OSError, ValueError):
                    pass
            if ack is not None:
                last_direct_ack = ack.end
                if claimed_at is not None and ack.start > claimed_at:
                    zombie_acks += 1
            try:
                placement = self.placement(others[probe % len(others)].base)
                if claimed_at is None and any(placement.get(t, (None,))[0] not in (node.node_id, None) for t in tenants):
                    claimed_at = time.monotonic()
            except RuntimeError:
                pass
            if claimed_at is not None and time.monotonic() - claimed_at > 1.0:
                break
            time.sleep(0.02)
        # Writable again, counted from the claim (before it, the node
        # itself serves its tenants until its fence closes).
        if claimed_at is not None:
            window.loss_at = claimed_at
        times = self.wait_writable(tenants, claimed_at or instant, self.arguments.bound, f"partition{number}")
        recovered = [seconds for seconds in times.values() if seconds is not None]
        self.partition_failover.extend(times.values())
        if claimed_at is None and tenants:
            self.problems.append(f"partition {number}: none of {node.node_id}'s tenants got another owner")
        if last_direct_ack is not None and claimed_at is not None and last_direct_ack >= claimed_at:
            self.problems.append(f"partition {number}: {node.node_id} acknowledged a write {last_direct_ack - claimed_at:.3f} s "
                                 "after its tenants were claimed elsewhere")
        if zombie_acks:
            self.problems.append(f"partition {number}: {zombie_acks} writes acknowledged by the partitioned node after the claim")
        fleet_env("heal", node.index)
        healed = time.monotonic()
        owners = self.settle(f"partition{number}")
        window.end = time.monotonic()
        self.details["partition"].append({
            "node": node.node_id, "how": "blackhole route to PostgreSQL in the node's namespace", "tenants": len(tenants),
            "last_direct_ack_seconds": None if last_direct_ack is None else round(last_direct_ack - instant, 3),
            "claim_seen_seconds": None if claimed_at is None else round(claimed_at - instant, 3),
            "lease_invalid_seen_seconds": None if lease_invalid_at is None else round(lease_invalid_at - instant, 3),
            "writes_acknowledged_after_claim": zombie_acks,
            "writable_after_claim_seconds_max": round(max(recovered), 3) if recovered else None,
            "node_alive_after_heal": node.alive(),
            "tenants_after_heal": sum(1 for owner in owners.values() if owner == node.node_id),
            "heal_settle_seconds": round(time.monotonic() - healed, 2)})

    def scenario_postgres_outage(self, number):
        """Loopback: no partition of one node; PostgreSQL stops for every
        node for lease + 1 s: after the lease, nothing may be acknowledged."""
        window = self.open_window("postgres-outage", None, "any")
        instant = time.monotonic()
        fleet_env("pg-stop")
        down = self.arguments.lease + 1.0
        time.sleep(down)
        fleet_env("pg-restart", 0)
        back = time.monotonic()
        with self.lock:
            late = [(tenant, ack) for tenant, acks in self.acks.items() for ack in acks
                    if ack.start > instant + self.arguments.lease and ack.end < back]
        if late:
            self.problems.append(f"postgres outage {number}: {len(late)} writes acknowledged while every lease had lapsed")
        times = self.wait_writable(sorted(self.tokens), back, self.arguments.bound, f"outage{number}")
        self.settle(f"outage{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        if len(recovered) < len(times):
            self.problems.append(f"postgres outage {number}: {len(times) - len(recovered)} tenants not writable after PostgreSQL came back")
        self.details["partition"].append({
            "how": "simulated on loopback: PostgreSQL stopped for every node", "down_seconds": down,
            "writes_acknowledged_after_lease": len(late), "recovery_seconds_max": max(recovered) if recovered else None})

    def scenario_pgrestart(self, number):
        window = self.open_window("pgrestart", None, "any")
        instant = time.monotonic()
        fleet_env("pg-restart", 1)
        back = time.monotonic()
        # Writes are lost when a node claims a tenant whose owner's lease
        # lapsed meanwhile and restores it from its replica: never before
        # PostgreSQL answers again (a claim is a statement), at most a
        # placement round after. Writes the old owner acknowledged while
        # PostgreSQL was down, before its fence closed, are aged to then,
        # not to the next scenario (fleet-chaos measured 13 s "ages" for
        # an encrypted tenant's last 1 s of writes before this).
        window.loss_at = back
        times = self.wait_writable(sorted(self.tokens), back, self.arguments.bound, f"pgrestart{number}")
        # Every tenant is concerned until the placement is stable again
        # (leases lapsed everywhere: tenants are claimed anew).
        self.settle(f"pgrestart{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        if len(recovered) < len(times):
            self.problems.append(f"pgrestart {number}: {len(times) - len(recovered)} tenants not writable after the restart")
        self.details["pgrestart"].append({"restart_seconds": round(back - instant, 2),
                                          "recovery_seconds_max": round(max(recovered), 3) if recovered else None})

    def scenario_pgkill(self, number):
        """PostgreSQL SIGKILLed, postmaster and backends, under writers; up
        again (crash recovery) after --pg-down-seconds. While it is dead no
        node can append to the tail: a durable write is refused (503), and
        one acknowledged then is a lie; an asynchronous one may be
        acknowledged until the node's lease lapses. Then every tenant
        takes a write again."""
        window = self.open_window("pgkill", None, "any")
        log_path = os.path.join(os.environ["FLEET_PG_DIR"], "postgres.log")
        recoveries_before = count_in(log_path, "automatic recovery in progress")
        killed_processes = postgres_kill(os.environ["FLEET_PG_DIR"])
        killed = time.monotonic()
        time.sleep(self.arguments.pg_down_seconds)
        restarting = time.monotonic()
        fleet_env("pg-restart", 0)   # its stop is a no-op on a dead cluster: a plain start, with crash recovery
        back = time.monotonic()
        # Lost, if at all, when a node claims a tenant after the restart
        # (as for pgrestart).
        window.loss_at = back
        with self.lock:
            acknowledged = [(tenant, ack) for tenant, acks in self.acks.items() for ack in acks
                            if killed < ack.start and ack.end < restarting]
        lapsed = killed + self.arguments.lease
        lies = [(tenant, ack) for tenant, ack in acknowledged
                if self.mode == "durable" or ack.start > lapsed]
        if lies:
            self.problems.append(f"pgkill {number}: {len(lies)} writes acknowledged while PostgreSQL was dead"
                                 f"{'' if self.mode == 'durable' else ' and every lease had lapsed'}: "
                                 f"{[f'{tenant} {ack.name}' for tenant, ack in lies[:3]]}")
        times = self.wait_writable(sorted(self.tokens), back, self.arguments.bound, f"pgkill{number}")
        self.settle(f"pgkill{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        if len(recovered) < len(times):
            self.problems.append(f"pgkill {number}: {len(times) - len(recovered)} tenants not writable after PostgreSQL came back")
        crash_recovery = count_in(log_path, "automatic recovery in progress") > recoveries_before
        if not crash_recovery:
            self.problems.append(f"pgkill {number}: PostgreSQL's log shows no crash recovery after the SIGKILL")
        self.details["pgkill"].append({
            "processes_killed": killed_processes, "down_seconds": round(restarting - killed, 2),
            "restart_seconds": round(back - restarting, 2), "crash_recovery": crash_recovery,
            "acknowledged_while_down": len(acknowledged), "acknowledged_while_down_wrongly": len(lies),
            "refused_or_failed_requests": window.failures, "refusal_examples": window.failure_examples,
            "recovery_seconds_max": round(max(recovered), 3) if recovered else None})

    def scenario_storedown(self, number):
        """The replica store down for every node and its Litestream for
        --store-down-seconds under writers (a folder read-only, a bucket
        unreachable): replicas stop, so in durable mode writes go on
        through the tail in PostgreSQL, which grows (until its bound
        refuses them: a detail, not a failure). Shortly after the store is
        back, a node that owns an encrypted tenant is killed (disk
        deleted): its tenants fail over from replicas that lag, plus the
        tail; no acknowledged write may be lost, and the failover counts
        against the bound."""
        if self.s3 is None and self.store_fault_error:
            raise RuntimeError(self.store_fault_error)
        outage = self.bucket_outage if self.s3 is not None else self.folder_outage
        victim = self.encrypted_owner(number)
        burst = self.start_tail_burst(victim) if self.arguments.tail_burst and self.mode == "durable" else None
        window = self.open_window("storedown", None, "any")
        down = time.monotonic()
        tail_before = self.tail_rows_last(down)
        store_details = outage(number, burst)
        up = time.monotonic()
        with self.lock:
            acknowledged = sum(1 for acks in self.acks.values() for ack in acks if down < ack.start and ack.end < up)
        refused, examples = window.failures, list(window.failure_examples)
        wait = 0.5
        time.sleep(wait)
        window.end = time.monotonic()
        # Asynchronous mode: what the killed node acknowledged from the
        # outage on had no way to its replica until the store came back,
        # and Litestream retries with a growing backoff (about 5 s after
        # a 10 s outage, 2026-11): lost, counted, and not held to the loss
        # window, which assumes a store that takes writes.
        self.store_outages.append((down, window.end))
        tail_at_kill = self.tail_rows_last(window.end)
        details = store_details()
        kill = self.kill_node(victim, number, label="storedown")
        burst_details = {}
        if burst is not None:
            tenant = burst["tenant"]
            burst_details = {"tail_burst": {
                "tenant": tenant, "encrypted": self.encrypted[tenant], "tail_rows_at_kill": burst["rows"],
                "burst_writes_acknowledged": burst["acknowledged"],
                "failover_seconds": kill.get("failover_seconds_by_tenant", {}).get(tenant)}}
        self.details["storedown"].append({
            "down_seconds": round(up - down, 2), **details, **burst_details,
            "acknowledged_while_down": acknowledged, "refused_or_failed_requests": refused, "refusal_examples": examples,
            "tail_rows_before": tail_before, "tail_rows_max_while_down": self.tail_rows_between(down, up),
            "tail_rows_last_sample_before_kill": tail_at_kill,
            "kill_seconds_after_store_back": round(wait, 2), "kill": kill})

    def start_tail_burst(self, node):
        """--tail-burst N: writers on one tenant of `node` (its encrypted
        one, when it owns one) during the store's outage, until fleet_tail
        holds N of its changes; the outage lasts until then (so the base
        can't catch up and cut them), and `node` is then killed: its
        failover replays them."""
        tenants = self.owned_by(node.node_id)
        if not tenants:
            raise RuntimeError(f"{node.node_id} owns no tenant to burst")
        tenant = next((t for t in tenants if self.encrypted[t]), tenants[0])
        burst = {"tenant": tenant, "rows": 0, "acknowledged": 0, "stop": threading.Event(), "done": threading.Event()}

        def burster(number):
            sequence = 0
            while not burst["stop"].is_set():
                sequence += 1
                if self.write(tenant, f"burst{number}-{sequence}", sequence) is not None:
                    with self.lock:
                        burst["acknowledged"] += 1
                else:
                    time.sleep(0.02)

        def counter():
            sql = f"SELECT count(*) FROM fleet_tail WHERE tenant_id = '{tenant}'"
            while not burst["stop"].wait(0.5):
                rows = self.count_tail(sql)
                if rows is not None:
                    burst["rows"] = rows
                    if rows >= self.arguments.tail_burst:
                        burst["stop"].set()
            burst["done"].set()

        burst["threads"] = [threading.Thread(target=burster, args=(number,), daemon=True) for number in range(16)]
        burst["threads"].append(threading.Thread(target=counter, daemon=True))
        return burst

    def wait_outage(self, burst):
        """The outage's length: --store-down-seconds, and, with a tail
        burst, until the burst is done (at most 300 s more)."""
        if burst is not None:
            for thread in burst["threads"]:
                thread.start()
        time.sleep(self.arguments.store_down_seconds)
        if burst is not None:
            if not burst["done"].wait(300):
                self.problems.append(f"storedown: the tail burst reached {burst['rows']} of {self.arguments.tail_burst} changes in 300 s")
            burst["stop"].set()
            for thread in burst["threads"]:
                thread.join(timeout=60)

    def folder_outage(self, number, burst=None):
        """storedown's outage on a folder: read-only in every node's mount
        namespace (checked from each) for --store-down-seconds, then
        writable again. Returns what to report, read once the store is back
        and before the kill: the namespaces, and what the nodes said of
        the store while it refused writes (their own errors and
        Litestream's, which logs to the server's output)."""
        pids = [pid for node in self.live_nodes() for pid in [node.process.pid] + descendants(node.process.pid)]
        logged = {node.node_id: count_in(node.log_path, "read-only file system") for node in self.live_nodes()}
        try:
            namespaces = self.store_fault.set_read_only(True, pids)
            writable_while_down = self.store_fault.writable_in(pids)
            if writable_while_down:
                self.problems.append(f"storedown {number}: the store stayed writable in {writable_while_down} of "
                                     f"{namespaces} mount namespaces")
            self.wait_outage(burst)
        finally:
            self.store_fault.set_read_only(False, pids)
        writable_after = self.store_fault.writable_in(pids)
        if writable_after != namespaces:
            self.problems.append(f"storedown {number}: the store writable again in {writable_after} of {namespaces} mount namespaces only")

        def details():
            errors = sum(count_in(node.log_path, "read-only file system") - logged.get(node.node_id, 0)
                         for node in self.live_nodes())
            return {"mount_namespaces": namespaces, "writable_namespaces_while_down": writable_while_down,
                    "writable_namespaces_after": writable_after, "read_only_errors_logged": errors}
        return details

    def bucket_outage(self, number, burst=None):
        """storedown's outage on a bucket: the fault proxy in front of moto
        closes every connection without answering (the store unreachable)
        for --store-down-seconds, then passes again. The fault must reach
        the nodes: some of their requests refused while it lasts."""
        before = self.s3.set_fault("refuse")
        try:
            self.wait_outage(burst)
        finally:
            during = self.s3.set_fault("pass")
        refused = during["requests"] - before["requests"]
        if refused == 0:
            self.problems.append(f"storedown {number}: no node sent the store a request in {self.arguments.store_down_seconds:.1f} s of outage")
        return lambda: {"store": "s3: every request refused by the fault proxy", "store_requests_refused": refused}

    def movable(self, number):
        """A tenant on a live node (the scenario's number picks it), its
        owner and epoch, and another live node to move it to."""
        placement = self.placement()
        live = {node.node_id for node in self.live_nodes()}
        candidates = sorted(tenant for tenant, (owner, _) in placement.items() if owner in live and tenant in self.tokens)
        if not candidates or len(live) < 2:
            raise RuntimeError(f"no tenant to move: placement {placement}, live nodes {sorted(live)}")
        tenant = candidates[number % len(candidates)]
        owner, epoch = placement[tenant]
        # A drained node takes no tenant: a move there is refused (409).
        targets = sorted(live - {owner} - self.drained) or sorted(live - {owner})
        return tenant, owner, epoch, targets[0]

    def scenario_move(self, number):
        tenant, owner, epoch, target = self.movable(number)
        window = self.open_window("move", [tenant], "retry_after")
        instant = time.monotonic()
        response = request(self.haproxy, "POST", f"/fleet/tenants/{tenant}/move", {"to": target}, self.operator, timeout=60)
        moved_at, after = None, None
        deadline = instant + 30
        while time.monotonic() < deadline:
            after = self.placement().get(tenant)
            if after and after[0] == target:
                moved_at = time.monotonic()
                break
            time.sleep(0.1)
        times = self.wait_writable([tenant], instant, self.arguments.bound, f"move{number}")
        window.end = time.monotonic()
        if response.status not in (200, 202, 204):
            self.problems.append(f"move {number}: POST /fleet/tenants/{tenant}/move answered {response.status} {response.body[:200]}")
        if moved_at is None:
            self.problems.append(f"move {number}: {tenant} did not reach {target} within 30 s (placement: {after})")
        elif after[1] is not None and epoch is not None and after[1] != epoch + 1:
            self.problems.append(f"move {number}: {tenant}'s epoch went from {epoch} to {after[1]}, not +1")
        self.details["move"].append({"tenant": tenant, "from": owner, "to": target, "status": response.status,
                                     "epoch_before": epoch, "epoch_after": after[1] if after else None,
                                     "seconds": None if moved_at is None else round(moved_at - instant, 3),
                                     "first_write_seconds": times[tenant]})

    def scenario_drain(self, number):
        node = self.victim(number)
        tenants = self.owned_by(node.node_id)
        window = self.open_window("drain", tenants, "retry_after")
        instant = time.monotonic()
        response = request(self.haproxy, "POST", f"/fleet/nodes/{node.node_id}/drain", None, self.operator, timeout=60)
        self.drained.add(node.node_id)
        drained_at, left = None, tenants
        deadline = instant + self.arguments.drain_seconds
        while time.monotonic() < deadline:
            left = self.owned_by(node.node_id)
            if not left:
                drained_at = time.monotonic()
                break
            time.sleep(0.2)
        times = self.wait_writable(tenants, instant, self.arguments.bound, f"drain{number}")
        window.end = time.monotonic()
        if response.status not in (200, 202, 204):
            self.problems.append(f"drain {number}: POST /fleet/nodes/{node.node_id}/drain answered {response.status} {response.body[:200]}")
        if drained_at is None:
            self.problems.append(f"drain {number}: {node.node_id} still owns {left} after {self.arguments.drain_seconds} s")
        recovered = [seconds for seconds in times.values() if seconds is not None]
        self.details["drain"].append({"node": node.node_id, "tenants": len(tenants), "status": response.status,
                                      "seconds": None if drained_at is None else round(drained_at - instant, 2),
                                      "slowest_first_write_seconds": round(max(recovered), 3) if recovered else None})

    def freeze(self, node, kind, number, during=None):
        """Freezes `node` (server and Litestream) for three leases, every
        tenant concerned (requests HAProxy sent to the frozen node hang
        until it wakes up or HAProxy takes it out). `during`: started
        first, in a thread (the request the freeze interrupts)."""
        window = self.open_window(kind, None, "any")
        tenants = self.owned_by(node.node_id)
        instant = time.monotonic()
        thread = None
        if during is not None:
            thread = threading.Thread(target=during, daemon=True)
            thread.start()
            time.sleep(0.05)
        node.freeze()
        frozen_for = 3 * self.arguments.lease
        try:
            time.sleep(frozen_for)
            claimed = {tenant: owner for tenant, (owner, _) in self.placement(self.haproxy).items()
                       if tenant in tenants and owner != node.node_id}
        finally:
            node.thaw()
        thawed = time.monotonic()
        if thread is not None:
            thread.join(timeout=90)
        # The lost writes, if any, are found by the end's check: a write the
        # woken node acknowledged that the tenant's new owner lacks.
        window.loss_at = instant
        times = self.wait_writable(tenants, thawed, self.arguments.bound, f"{kind}{number}")
        self.settle(f"{kind}{number}")
        window.end = time.monotonic()
        recovered = [seconds for seconds in times.values() if seconds is not None]
        if len(recovered) < len(tenants):
            self.problems.append(f"{kind} {number}: {len(tenants) - len(recovered)} of {node.node_id}'s tenants not writable after it woke up")
        if not node.alive():
            self.problems.append(f"{kind} {number}: {node.node_id} exited after it woke up:\n{node.log_tail(10)}")
        return {"node": node.node_id, "tenants": len(tenants), "frozen_seconds": round(frozen_for, 2),
                "claimed_by_others_while_frozen": len(claimed),
                "writable_after_thaw_seconds_max": round(max(recovered), 3) if recovered else None}

    def scenario_freeze(self, number):
        details = self.freeze(self.victim(number), "freeze", number)
        if details["claimed_by_others_while_frozen"] == 0 and details["tenants"]:
            self.problems.append(f"freeze {number}: no tenant of {details['node']} was claimed while it was frozen for three leases")
        self.details["freeze"].append(details)

    def scenario_freezemove(self, number):
        tenant, owner, epoch, target = self.movable(number)
        node = next(node for node in self.live_nodes() if node.node_id == owner)
        answers = []

        def move():
            try:
                answers.append(request(self.haproxy, "POST", f"/fleet/tenants/{tenant}/move", {"to": target}, self.operator, timeout=60).status)
            except OSError as error:
                answers.append(repr(error))

        details = self.freeze(node, "freezemove", number, during=move)
        details.update({"tenant": tenant, "from": owner, "to": target, "epoch_before": epoch,
                        "move_answer": answers[0] if answers else None,
                        "placement_after": self.placement().get(tenant)})
        self.details["freezemove"].append(details)

    # ----------------------------------------------------------- checks

    def check(self):
        """Reads every tenant back; returns (lost acks, forked tenants,
        reused ids, lost acks' ages)."""
        lost, forked, reused, ages = [], [], 0, []
        for tenant in sorted(self.tokens):
            response = None
            for _ in range(50):
                try:
                    response = request(self.haproxy, "GET", f"/tenants/{tenant}/players", token=self.tokens[tenant], timeout=30)
                    if response.status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            if response is None or response.status != 200:
                self.problems.append(f"{tenant}: reading back answered {None if response is None else (response.status, response.body[:200])}")
                lost.extend((tenant, ack) for ack in self.acks.get(tenant, []))
                continue
            held = {player["id"]: player["name"] for player in response.json()}
            missing, reused_here, fork = analyze(self.acks.get(tenant, []), held)
            lost.extend((tenant, ack) for ack in missing)
            reused += reused_here
            if fork:
                forked.append(tenant)
            for ack in missing:
                ages.append((self.encrypted[tenant], loss_age(ack, self.events()), tenant, ack))
        return lost, forked, reused, ages

    def lost_by_tenant(self, lost):
        spans = {}
        for tenant, ack in lost:
            count, first, last = spans.get(tenant, (0, float("inf"), 0.0))
            spans[tenant] = (count + 1, min(first, ack.end - self.started), max(last, ack.end - self.started))
        return spans

    def sample_tail(self, stop):
        """Durable mode: samples the durable tail in PostgreSQL each second
        (the most changes any tenant has there), until `stop`."""
        if not glob.glob("/usr/lib/postgresql/*/bin/psql"):
            self.problems.append("no psql to sample fleet_tail")
            return
        sql = "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM fleet_tail GROUP BY tenant_id) AS counts"
        while not stop.wait(1.0):
            rows = self.count_tail(sql)
            if rows is not None:
                self.tail_rows_max = max(self.tail_rows_max or 0, rows)
                with self.lock:
                    self.tail_samples.append((time.monotonic(), rows))

    def count_tail(self, sql):
        """The number `sql` counts in fleet_tail, read with psql; None when
        PostgreSQL did not answer within 5 s (restarting, partitioned) or
        there is no psql."""
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))
        if not candidates:
            return None
        try:
            result = subprocess.run([candidates[-1], self.database_url, "-AtX", "-c", sql],
                                    capture_output=True, text=True, timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if result.returncode == 0 and result.stdout.strip().isdigit():
            return int(result.stdout.strip())
        return None

    def tail_rows_last(self, before):
        """The last sample of fleet_tail taken before `before` (None: none)."""
        with self.lock:
            return next((rows for at, rows in reversed(self.tail_samples) if at <= before), None)

    def tail_rows_between(self, start, end):
        """The most changes one tenant had in fleet_tail among the samples
        taken between `start` and `end` (None: none, or async mode)."""
        with self.lock:
            return max((rows for at, rows in self.tail_samples if start <= at <= end), default=None)

    def during_store_outage(self, ack):
        return in_flight_during(ack, self.store_outages)

    def events(self):
        return [window.loss_at for window in self.windows if not window.kind.endswith("rebalance")]

    # ---------------------------------------------------------- running

    def create_tenants(self):
        for index in range(self.arguments.tenants):
            tenant = f"t{index:02d}"
            encrypted = index % 5 == 4
            response = None
            for _ in range(20):
                response = request(self.haproxy, "POST", "/tenants", {"id": tenant, "encrypted": encrypted}, self.operator, timeout=30)
                if response.status == 201:
                    break
                time.sleep(0.25)
            if response.status != 201:
                raise RuntimeError(f"creating {tenant} through HAProxy: {response.status} {response.body[:300]}")
            self.tokens[tenant] = response.json()["token"]
            self.encrypted[tenant] = encrypted

    def run(self):
        arguments = self.arguments
        log(f"{self.mode}: starting {len(self.nodes)} nodes ({network()}), PostgreSQL at {self.database_url}")
        for node in self.nodes:
            self.start_node(node)
        ready = [self.wait_ready(node) for node in self.nodes]
        self.loss_window = ready[0].get("lossWindow")
        if not isinstance(ready[0].get("fleet"), dict):
            raise RuntimeError(f"/health/ready shows no fleet section: {json.dumps(ready[0])[:300]}")
        self.create_tenants()
        self.settle("start")
        log(f"{self.mode}: {len(self.tokens)} tenants, {arguments.writers} writers")
        stop = threading.Event()
        threads = [threading.Thread(target=self.writer, args=(number, stop), daemon=True) for number in range(arguments.writers)]
        if self.mode == "durable":
            threads.append(threading.Thread(target=self.sample_tail, args=(stop,), daemon=True))
        started = time.monotonic()
        for thread in threads:
            thread.start()
        plan = []
        for kind in arguments.scenarios:
            plan += [kind] * (arguments.kills if kind == "kill" else 1)
        try:
            for number, kind in enumerate(plan):
                time.sleep(arguments.seconds)
                log(f"{self.mode}: {kind} ({number + 1}/{len(plan)})")
                try:
                    getattr(self, f"scenario_{kind}")(number)
                except Exception as error:   # the scenario failed: said, and the campaign goes on
                    self.problems.append(f"{kind} {number} raised {type(error).__name__}: {error}")
                    for window in self.windows:
                        if window.end is None:
                            window.end = time.monotonic()
            time.sleep(arguments.seconds)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        elapsed = time.monotonic() - started
        lost, forked, reused, ages = self.check()
        for node in self.nodes:
            if not node.alive():
                self.problems.append(f"{node.node_id} had exited by itself (status {node.process.returncode}) before the end:\n{node.log_tail(10)}")
                continue
            status = node.stop()
            if status != 0:
                self.problems.append(f"{node.node_id} exited with {status} on SIGTERM")
        summary = self.summary(lost, forked, reused, ages, elapsed)
        if self.s3 is not None:
            # The replicas are in the bucket: Litestream's files of plain
            # tenants and the encrypted snapshots, under each epoch.
            keys = self.s3.objects(f"fleet-{self.mode}/tenants/")
            snapshots = sum(1 for key in keys if key.endswith("/encrypted.sqlite"))
            summary["store_objects"] = {"objects": len(keys), "encrypted_snapshots": snapshots,
                                        "requests": self.s3.state().get("kinds")}
            if not keys or (self.encrypted and any(self.encrypted.values()) and not snapshots):
                self.problems.append(f"the bucket holds {len(keys)} objects, {snapshots} of them encrypted snapshots, under fleet-{self.mode}/tenants/")
        return summary

    def stop(self):
        """Every node killed, the store's fault undone, moto stopped."""
        for node in self.nodes:
            node.kill()
        if self.store_fault is not None:
            self.store_fault.unmount()
        if self.s3 is not None:
            self.s3.stop()

    def summary(self, lost, forked, reused, ages, elapsed):
        window = self.loss_window or {}
        plain_window, encrypted_window = window.get("plainSeconds"), window.get("encryptedSeconds")
        slack = self.arguments.loss_slack
        if ages and (plain_window is None or encrypted_window is None):
            self.problems.append(f"/health/ready shows no lossWindow with plainSeconds and encryptedSeconds ({window}): lost writes cannot be checked against it")
            outside = ages
        else:
            outside = [(encrypted, age, tenant, ack) for encrypted, age, tenant, ack in ages
                       if not self.during_store_outage(ack)
                       if age is None or age > (encrypted_window if encrypted else plain_window) + slack]
        failover = [round(seconds, 3) for seconds in self.failover if seconds is not None]
        acknowledged = sum(len(acks) for acks in self.acks.values())
        return {
            "mode": self.mode, "elapsed_seconds": round(elapsed, 1), "requests": self.requests,
            "acknowledged_writes": acknowledged,
            "acknowledged_writes_lost": len(lost),
            "encrypted_acknowledged_writes_lost": sum(1 for tenant, _ in lost if self.encrypted[tenant]),
            "tail_rows_max": self.tail_rows_max,
            "lost_examples": [f"{tenant} id {ack.id} {ack.name}" for tenant, ack in lost[:5]],
            "lost_by_tenant": {tenant: f"{count} acknowledged at {first:.2f}-{last:.2f} s"
                               for tenant, (count, first, last) in self.lost_by_tenant(lost).items()},
            "lost_write_ages_seconds_max": max((age for _, age, _, _ in ages if age is not None), default=None),
            "lost_outside_loss_window": len(outside),
            "lost_acknowledged_during_store_outage": sum(1 for _, ack in lost if self.during_store_outage(ack)),
            "lost_outside_examples": [
                f"{tenant}{' (encrypted)' if encrypted else ''} {ack.name}: answered at {ack.end - self.started:.2f} s, "
                f"{'no event after it' if age is None else f'{age:.2f} s before the event that lost it'}"
                for encrypted, age, tenant, ack in outside[:10]], "loss_window": window, "loss_window_slack_seconds": slack,
            "ids_reused_after_loss": reused,
            "forked_sequences": len(forked), "forked_tenants": forked,
            "failover_seconds": sorted(failover),
            "failover_unrecovered": sum(1 for seconds in self.failover if seconds is None),
            "partition_writable_after_claim_seconds": sorted(round(s, 3) for s in self.partition_failover if s is not None),
            "failed_requests_on_unaffected_tenants": len(self.failures),
            "failure_examples": [f"{tenant}: {detail}" for tenant, detail in self.failures[:5]],
            "failed_requests_in_scenarios": self.expected_failures,
            "retry_after_503": self.retry_after, "cut_in_flight_by_a_kill": self.cut_by_kill,
            "freeze_503_of_rebalancing_moves": self.freeze_503,
            "scenarios": {kind: details for kind, details in self.details.items() if details},
            "windows": [f"{window.kind} {window.start - self.started:.2f}-"
                        f"{'open' if window.end is None else f'{window.end - self.started:.2f}'} s" for window in self.windows],
            "problems": self.problems,
        }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="the scripts/test version: debug build, 12 tenants, 4 writers, 1 kill, the store down 10 s")
    parser.add_argument("--kills", type=int, default=None)
    parser.add_argument("--tenants", type=int, default=None)
    parser.add_argument("--writers", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="load between scenarios")
    parser.add_argument("--mode", choices=["durable", "async", "both"], default="both")
    parser.add_argument("--restore", choices=["eager", "on-first-request"], default="eager")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--encrypted-backup-seconds", type=int, default=2,
                        help="encrypted tenants' backup interval: their loss window, and a durable write's wait")
    parser.add_argument("--drain-seconds", type=float, default=None, help="how long a drain may take (120 s; 30 with --short)")
    parser.add_argument("--pg-down-seconds", type=float, default=3.0, help="pgkill: how long PostgreSQL stays dead")
    parser.add_argument("--tail-burst", type=int, default=0,
                        help="storedown, durable mode: writers on one tenant of the node then killed until fleet_tail holds this many of its changes (0: none)")
    parser.add_argument("--store-down-seconds", type=float, default=None, help="storedown: how long the store is read-only (30 s; 10 with --short)")
    parser.add_argument("--store", choices=["folder", "s3"], default="folder",
                        help="the replica store: a shared folder, or a bucket of a moto_server (S3-compatible) behind scripts/s3-fault-proxy.py")
    parser.add_argument("--bound", type=float, default=5.0, help="failover bound, seconds")
    parser.add_argument("--loss-slack", type=float, default=1.0, help="async: seconds allowed beyond the documented loss window")
    parser.add_argument("--release", action="store_true")
    parser.add_argument("--server", help="the sample's executable (else built)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--ports", required=True, help="the nodes' ports, comma-separated (from scripts/fleet-chaos)")
    arguments = parser.parse_args()
    short = arguments.short
    arguments.kills = arguments.kills if arguments.kills is not None else (1 if short else 3)
    arguments.tenants = arguments.tenants or (12 if short else 30)
    arguments.writers = arguments.writers or (4 if short else 8)
    arguments.seconds = arguments.seconds if arguments.seconds is not None else (2.0 if short else 5.0)
    arguments.drain_seconds = arguments.drain_seconds or (30.0 if short else 120.0)
    arguments.store_down_seconds = arguments.store_down_seconds or (10.0 if short else 30.0)
    arguments.scenarios = [kind for kind in arguments.scenarios.split(",") if kind]
    unknown = set(arguments.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}: choose among {SCENARIOS}")
    if arguments.seed is None:
        arguments.seed = secrets.randbelow(1 << 31)
    log(f"seed {arguments.seed}")
    server = arguments.server or build_server(arguments.release and not short)
    ports = [int(port) for port in arguments.ports.split(",")]
    haproxy = os.environ["FLEET_HAPROXY_URL"]
    modes = ["durable", "async"] if arguments.mode == "both" else [arguments.mode]
    results = {}
    status = 0
    for mode in modes:
        database = f"fleet_{mode}"
        fleet_env("psql", "-c", f"CREATE DATABASE {database}")
        url = urllib.parse.urlsplit(os.environ["FLEET_PG_URL"])._replace(path="/" + database).geturl()
        campaign = None
        try:
            campaign = Campaign(arguments, mode, server, ports, url, haproxy)
            results[mode] = campaign.run()
        except Exception as error:   # reported, never hidden: the run fails
            results[mode] = {"mode": mode, "error": str(error)[:2000]}
            log(f"{mode}: {error}")
        finally:
            if campaign is not None:
                campaign.stop()
    report = combine(arguments, results)
    print(json.dumps(report, indent=1))
    return 1 if report["failed"] else status


def combine(arguments, results):
    def total(key, mode=None):
        # None when a mode it sums did not run to the end: never a 0 for a
        # check that did not happen.
        chosen = [result for name, result in results.items() if mode in (None, name)]
        if any("error" in result for result in chosen):
            return None
        return sum(result.get(key, 0) for result in chosen)
    failover = sorted(s for result in results.values() for s in result.get("failover_seconds", []))
    durable_lost = total("acknowledged_writes_lost", "durable")
    report = {
        "network": network(),
        "store": "s3: moto_server behind scripts/s3-fault-proxy.py" if arguments.store == "s3" else "folder",
        "partition": "blackhole route to PostgreSQL in the node's namespace" if network() == "netns"
        else "simulated: PostgreSQL stopped for every node (no namespaces on this machine)",
        "seed": arguments.seed, "restore": arguments.restore, "lease_seconds": arguments.lease,
        "encrypted_backup_seconds": arguments.encrypted_backup_seconds,
        "tenants": arguments.tenants, "writers": arguments.writers, "kills": arguments.kills,
        "acknowledged_writes": total("acknowledged_writes"),
        "acknowledged_writes_lost": durable_lost if "durable" in results else None,
        "async_writes_lost": total("acknowledged_writes_lost", "async") if "async" in results else None,
        "encrypted_acknowledged_writes_lost": total("encrypted_acknowledged_writes_lost", "durable") if "durable" in results else None,
        "tail_rows_max": results.get("durable", {}).get("tail_rows_max"),
        "failover_seconds_p50": percentile(failover, 0.5),
        "failover_seconds_p99": percentile(failover, 0.99),
        "failover_seconds_max": max(failover) if failover else None,
        "failover_bound_seconds": arguments.bound,
        "forked_sequences": total("forked_sequences"),
        "failed_requests_on_unaffected_tenants": total("failed_requests_on_unaffected_tenants"),
        "modes": results,
    }
    reasons = []
    for name, result in results.items():
        if "error" in result:
            reasons.append(f"{name}: {result['error'][:300]}")
        reasons += [f"{name}: {problem}" for problem in result.get("problems", [])]
        if name == "async" and result.get("lost_outside_loss_window"):
            reasons.append(f"async: {result['lost_outside_loss_window']} lost writes older than the loss window + slack")
    if durable_lost:  # None (did not run) is reported through its error
        reasons.append(f"durable: {durable_lost} acknowledged writes lost")
    if "durable" in results and "error" not in results["durable"] and report["tail_rows_max"] is None:
        reasons.append("durable: fleet_tail was never sampled (no tail_rows_max)")
    if report["forked_sequences"]:
        reasons.append(f"{report['forked_sequences']} forked sequences")
    if "kill" in arguments.scenarios and not failover:
        reasons.append("no failover measured")
    unrecovered = total("failover_unrecovered") or 0
    if unrecovered:
        reasons.append(f"{unrecovered} tenants of killed nodes never writable again")
    if failover and failover[-1] > arguments.bound:
        reasons.append(f"failover max {failover[-1]} s over the bound of {arguments.bound} s")
    if report["failed_requests_on_unaffected_tenants"]:
        reasons.append(f"{report['failed_requests_on_unaffected_tenants']} failed requests on unaffected tenants")
    report["failed"] = reasons
    return report


if __name__ == "__main__":
    sys.exit(main())
