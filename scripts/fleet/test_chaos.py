"""The campaign's own judgement, on histories written out by hand: what
counts as a lost write and what as a fork (scripts/fleet/chaos.py's
analyze), the percentile of the failover figures and an answer cut
short; and its faults,
for real: a PostgreSQL cluster killed (pgkill) and a folder made
read-only for processes in other mount namespaces (storedown), which
need root, PostgreSQL's binaries and util-linux's nsenter, as the
campaign does.

Run: python3 -m unittest discover -s scripts/fleet
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import Ack, Campaign, analyze, count_in, in_flight_during, loss_age  # noqa: E402
import fleetlib  # noqa: E402
from fleetlib import ROOT, ReadOnlyFolder, descendants, percentile, postgres_kill, process_exists  # noqa: E402


def ack(id, name, start, end):
    return Ack(id, name, start, end, "haproxy")


class AnalyzeTests(unittest.TestCase):
    def test_every_acknowledged_write_held_is_neither_lost_nor_forked(self):
        acks = [ack(i, f"w-{i}", i, i + 0.1) for i in range(1, 6)]
        missing, reused, fork = analyze(acks, {i: f"w-{i}" for i in range(1, 6)})
        self.assertEqual((missing, reused, fork), ([], 0, False))

    def test_an_asynchronous_failover_loses_the_tail_and_reuses_its_ids_without_forking(self):
        # The old owner acknowledged 1…5 and died at t=5.5; the replica had
        # 1…3; the new owner went on from 4 at t=8.
        old = [ack(i, f"old-{i}", i, i + 0.1) for i in range(1, 6)]
        new = [ack(i, f"new-{i}", 4 + i, 4 + i + 0.1) for i in range(4, 8)]
        held = {1: "old-1", 2: "old-2", 3: "old-3", 4: "new-4", 5: "new-5", 6: "new-6", 7: "new-7"}
        missing, reused, fork = analyze(old + new, held)
        self.assertEqual([a.name for a in missing], ["old-4", "old-5"])
        self.assertEqual(reused, 2)
        self.assertFalse(fork)

    def test_a_zombie_acknowledging_after_the_new_owner_did_is_a_fork(self):
        # The new owner acknowledged id 4 at t=8.1; the old owner, cut from
        # PostgreSQL but still taking writes, acknowledged a write sent at t=9.
        new = [ack(4, "new-4", 8, 8.1)]
        zombie = [ack(4, "zombie-4", 9, 9.05)]
        missing, reused, fork = analyze([ack(3, "old-3", 1, 1.1)] + new + zombie, {3: "old-3", 4: "new-4"})
        self.assertEqual([a.name for a in missing], ["zombie-4"])
        self.assertTrue(fork)

    def test_a_write_lost_past_every_surviving_id_is_a_loss_not_a_fork(self):
        # One history acknowledged 4 then 9, and a later failover lost 9:
        # the same record a zombie would leave writing 9 while a new owner
        # wrote 4. Ids alone cannot tell them apart, so this is a loss; the
        # partition scenario's direct probes catch such a zombie instead.
        missing, _, fork = analyze([ack(4, "w-4", 8, 8.1), ack(9, "w-9", 9, 9.05)], {4: "w-4"})
        self.assertEqual([a.name for a in missing], ["w-9"])
        self.assertFalse(fork)

    def test_overlapping_requests_are_not_proof_of_a_fork(self):
        # The surviving write was still in flight when the lost one was
        # sent: the two may have committed one after the other.
        missing, _, fork = analyze([ack(4, "new-4", 8, 9.5), ack(4, "old-4", 9, 9.1)], {4: "new-4"})
        self.assertEqual(len(missing), 1)
        self.assertFalse(fork)

    def test_a_lost_write_with_nothing_after_it_is_lost_not_forked(self):
        missing, reused, fork = analyze([ack(1, "a", 1, 1.1), ack(2, "b", 2, 2.1)], {1: "a"})
        self.assertEqual(([a.name for a in missing], reused, fork), (["b"], 0, False))


class LossAgeTests(unittest.TestCase):
    def test_a_write_lost_by_a_kill_is_as_old_as_the_kill_is_after_its_answer(self):
        events = [10.0, 30.0]
        self.assertAlmostEqual(loss_age(ack(1, "a", 9.0, 9.2), events), 0.8)

    def test_an_answer_read_a_hair_after_the_kill_is_charged_to_that_kill(self):
        # Sent before the kill, answered just after: age 0, not 20 s.
        self.assertEqual(loss_age(ack(1, "a", 9.9, 10.01), [10.0, 30.0]), 0.0)

    def test_a_cut_off_node_acknowledging_until_its_fence_closes_is_aged_to_the_claim(self):
        # Partition at 14 s; the node acknowledges until its fence closes
        # at 15.5 s; a survivor claims at 16 s; the next event is at 23 s.
        events = [16.0, 23.0]
        self.assertAlmostEqual(loss_age(ack(1, "z", 15.4, 15.45), events), 0.55)
        self.assertAlmostEqual(loss_age(ack(2, "y", 13.0, 13.1), events), 2.9)

    def test_a_write_with_no_event_after_it_has_no_age(self):
        self.assertIsNone(loss_age(ack(1, "a", 40.0, 40.1), [10.0]))


class StoreOutageTests(unittest.TestCase):
    def test_only_writes_answered_or_in_flight_while_the_store_was_down_are_exempt_from_the_loss_window(self):
        outages = [(10.0, 20.5)]   # the store's fall, then the kill 0.5 s after it came back
        self.assertTrue(in_flight_during(ack(1, "a", 12.0, 12.1), outages))
        self.assertTrue(in_flight_during(ack(2, "b", 9.9, 10.2), outages))    # sent before, answered during
        self.assertTrue(in_flight_during(ack(3, "c", 20.4, 20.6), outages))   # in flight at the kill
        self.assertFalse(in_flight_during(ack(4, "d", 9.0, 9.8), outages))    # answered before: held to the window
        self.assertFalse(in_flight_during(ack(5, "e", 20.6, 20.7), outages))
        self.assertFalse(in_flight_during(ack(6, "f", 12.0, 12.1), []))


class PercentileTests(unittest.TestCase):
    def test_nearest_rank(self):
        self.assertIsNone(percentile([], 0.5))
        self.assertEqual(percentile([3.0], 0.5), 3.0)
        self.assertEqual(percentile([4, 1, 3, 2], 0.5), 2)
        self.assertEqual(percentile([1, 2, 3, 4, 5], 0.5), 3)
        self.assertEqual(percentile(list(range(1, 101)), 0.99), 99)
        self.assertEqual(percentile([1, 2, 3], 1.0), 3)


class WaitWritableTests(unittest.TestCase):
    """The failover prober: each tenant of a killed node is measured on its
    own, so a tenant that answers slowly (or never) adds nothing to the
    others' figures, as it did when one prober wrote to them in turn."""

    class Probed:
        """What wait_writable uses of a campaign: its writes (2 s for
        "a-slow", 20 ms otherwise) and its acknowledgements."""

        def __init__(self):
            self.lock = threading.Lock()
            self.acks = {}

        def write(self, tenant, name, score, timeout=30):
            start = time.monotonic()
            time.sleep(2.0 if tenant == "a-slow" else 0.02)
            acknowledged = ack(score, name, start, time.monotonic())
            with self.lock:
                self.acks.setdefault(tenant, []).append(acknowledged)
            return acknowledged

        def first_ack_after(self, tenant, instant):
            return Campaign.first_ack_after(self, tenant, instant)

    def test_a_slow_tenant_delays_no_other(self):
        tenants = ["a-slow"] + [f"t{index:03d}" for index in range(100)]
        since = time.monotonic()
        times = Campaign.wait_writable(self.Probed(), tenants, since, 1.0, "test")
        self.assertGreaterEqual(times["a-slow"], 2.0)
        fast = [times[tenant] for tenant in tenants[1:]]
        self.assertTrue(all(seconds is not None for seconds in fast), times)
        self.assertLess(max(fast), 1.0, sorted(fast)[-5:])


class PostgresKillTests(unittest.TestCase):
    def test_the_whole_cluster_dies_at_once_and_its_next_start_recovers_from_the_crash(self):
        folder = tempfile.mkdtemp(prefix="chaos-pgkill-")
        postgres = os.path.join(ROOT, "scripts", "postgres")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        try:
            subprocess.run([postgres, "start", folder, port], check=True, capture_output=True)
            with open(os.path.join(folder, "data", "postmaster.pid")) as file:
                postmaster = int(file.readline())
            cluster = [postmaster] + descendants(postmaster)
            self.assertGreater(len(cluster), 3)   # checkpointer, walwriter…: the backends go too

            killed = postgres_kill(folder)

            self.assertGreaterEqual(killed, len(cluster))
            self.assertEqual([pid for pid in cluster if process_exists(pid)], [])
            # No shutdown happened: pg_ctl finds the stale postmaster.pid,
            # and the next start replays the WAL.
            self.assertTrue(os.path.exists(os.path.join(folder, "data", "postmaster.pid")))
            subprocess.run([postgres, "start", folder, port], check=True, capture_output=True)
            self.assertEqual(count_in(os.path.join(folder, "postgres.log"), "automatic recovery in progress"), 1)
        finally:
            subprocess.run([postgres, "stop", folder], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)


class ReadOnlyFolderTests(unittest.TestCase):
    def test_the_folder_refuses_writes_in_every_mount_namespace_given_then_takes_them_again(self):
        parent = tempfile.mkdtemp(prefix="chaos-store-")
        store = os.path.join(parent, "replicas")
        os.makedirs(store)
        folder = ReadOnlyFolder(store)
        folder.mount()
        # A process with a mount namespace of its own, a copy of ours, as
        # `ip netns exec` gives each node.
        other = subprocess.Popen(["unshare", "--mount", "sleep", "60"])
        try:
            deadline = time.monotonic() + 5
            while os.readlink(f"/proc/{other.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
                self.assertLess(time.monotonic(), deadline, "unshare never entered a mount namespace of its own")
                time.sleep(0.01)

            # Ours alone: the copy keeps writing (why the campaign remounts
            # in each node's namespace).
            self.assertEqual(folder.set_read_only(True, []), 1)
            self.assertEqual(folder.writable_in([other.pid]), 1)
            with self.assertRaises(OSError):
                open(os.path.join(store, "refused"), "w").close()

            self.assertEqual(folder.set_read_only(True, [other.pid]), 2)
            self.assertEqual(folder.writable_in([other.pid]), 0)

            self.assertEqual(folder.set_read_only(False, [other.pid]), 2)
            self.assertEqual(folder.writable_in([other.pid]), 2)
            open(os.path.join(store, "taken"), "w").close()
        finally:
            other.kill()
            other.wait()
            folder.unmount()
        # A plain folder again: deletable.
        with open("/proc/self/mounts") as mounts:
            self.assertNotIn(store, mounts.read())
        shutil.rmtree(parent)
        self.assertFalse(os.path.exists(parent))


if __name__ == "__main__":
    unittest.main()


class CutAnswerTests(unittest.TestCase):
    def test_an_answer_cut_short_by_a_dying_node_is_an_os_error(self):
        # A real server that promises 34 bytes of body, sends none and
        # closes, as a node killed mid-response does behind HAProxy.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def answer():
            connection, _ = listener.accept()
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 34\r\nContent-Type: application/json\r\n\r\n")
            connection.close()

        thread = threading.Thread(target=answer)
        thread.start()
        try:
            with self.assertRaises(OSError):
                fleetlib.request(f"http://127.0.0.1:{listener.getsockname()[1]}", "POST", "/tenants/t0/players", {"name": "x"})
        finally:
            thread.join()
            listener.close()
