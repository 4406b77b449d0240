"""The campaign's own judgement, on histories written out by hand: what
counts as a lost write and what as a fork (scripts/fleet/chaos.py's
analyze), and the percentile of the failover figures.

Run: python3 -m unittest discover -s scripts/fleet
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos import Ack, analyze, loss_age  # noqa: E402
from fleetlib import percentile  # noqa: E402


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


class PercentileTests(unittest.TestCase):
    def test_nearest_rank(self):
        self.assertIsNone(percentile([], 0.5))
        self.assertEqual(percentile([3.0], 0.5), 3.0)
        self.assertEqual(percentile([4, 1, 3, 2], 0.5), 2)
        self.assertEqual(percentile([1, 2, 3, 4, 5], 0.5), 3)
        self.assertEqual(percentile(list(range(1, 101)), 0.99), 99)
        self.assertEqual(percentile([1, 2, 3], 1.0), 3)


if __name__ == "__main__":
    unittest.main()
