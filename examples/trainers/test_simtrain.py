"""Tests of simtrain.py's compute model: what it writes to the ledger, the rate it reads
from its neighbours there, and how long its work takes at that rate. Standard library
only."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simtrain  # noqa: E402


class LedgerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def neighbour(self, card, text):
        # The parent of this test is alive: it stands for another trainer.
        with open(os.path.join(self.dir, f"{card}-{os.getppid()}"), "w") as f:
            f.write(text)

    def test_writes_its_utilization_after_its_bytes(self):
        led = simtrain.Ledger(self.dir, 0, util=0.45)
        ok, _ = led.allocate(1 << 30, 24 << 30)
        self.assertTrue(ok)
        with open(led.path) as f:
            self.assertEqual(f.read().split(), [str(1 << 30), "0.45"])

    def test_rate_is_the_models(self):
        led = simtrain.Ledger(self.dir, 0, util=1.0)
        self.assertEqual(led.rate(0.05), 1.0)  # alone
        self.neighbour(0, f"{1 << 30} 1.0")
        self.assertAlmostEqual(led.rate(0), 0.5)  # two compute-bound jobs
        self.assertAlmostEqual(led.rate(0.05), 0.475)
        self.neighbour(1, f"{1 << 30} 1.0")  # another card: no neighbour of this one
        self.assertAlmostEqual(led.rate(0), 0.5)

    def test_half_idle_jobs_keep_their_speed(self):
        led = simtrain.Ledger(self.dir, 0, util=0.5)
        self.neighbour(0, f"{1 << 30} 0.5")
        self.assertEqual(led.rate(0), 1.0)

    def test_a_neighbour_without_utilization_takes_none(self):
        led = simtrain.Ledger(self.dir, 0, util=1.0)
        self.neighbour(0, str(1 << 30))  # an older simtrain, or sim_gpu_util unset
        self.assertEqual(led.rate(0), 1.0)
        self.assertEqual(led._used_by_others()[0], 1 << 30)


class WorkTest(unittest.TestCase):
    def test_work_takes_longer_at_a_lower_rate(self):
        slept = []
        real = simtrain.time.sleep
        simtrain.time.sleep = slept.append
        try:
            simtrain.work(1.0, lambda: 0.5)
            at_half = sum(slept)
            slept.clear()
            rates = iter([1.0] * 10 + [0.25] * 1000)  # alone for half a second, then crowded
            simtrain.work(1.0, lambda: next(rates))
        finally:
            simtrain.time.sleep = real
        self.assertAlmostEqual(at_half, 2.0)
        self.assertAlmostEqual(sum(slept), 0.5 + 0.5 / 0.25)


if __name__ == "__main__":
    unittest.main()
