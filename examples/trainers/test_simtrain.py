"""Tests of simtrain.py, with the standard library alone: its compute model (what it
writes to the ledger, the rate it reads from its neighbours there, and how long its
work takes at that rate) and its training curve."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simtrain as st  # noqa: E402


class LedgerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def neighbour(self, card, text):
        # The parent of this test is alive: it stands for another trainer.
        with open(os.path.join(self.dir, f"{card}-{os.getppid()}"), "w") as f:
            f.write(text)

    def test_writes_its_utilization_after_its_bytes(self):
        led = st.Ledger(self.dir, 0, util=0.45)
        ok, _ = led.allocate(1 << 30, 24 << 30)
        self.assertTrue(ok)
        with open(led.path) as f:
            self.assertEqual(f.read().split(), [str(1 << 30), "0.45"])

    def test_rate_is_the_models(self):
        led = st.Ledger(self.dir, 0, util=1.0)
        self.assertEqual(led.rate(0.05), 1.0)  # alone
        self.neighbour(0, f"{1 << 30} 1.0")
        self.assertAlmostEqual(led.rate(0), 0.5)  # two compute-bound jobs
        self.assertAlmostEqual(led.rate(0.05), 0.475)
        self.neighbour(1, f"{1 << 30} 1.0")  # another card: no neighbour of this one
        self.assertAlmostEqual(led.rate(0), 0.5)

    def test_half_idle_jobs_keep_their_speed(self):
        led = st.Ledger(self.dir, 0, util=0.5)
        self.neighbour(0, f"{1 << 30} 0.5")
        self.assertEqual(led.rate(0), 1.0)

    def test_a_neighbour_without_utilization_takes_none(self):
        led = st.Ledger(self.dir, 0, util=1.0)
        self.neighbour(0, str(1 << 30))  # an older simtrain, or sim_gpu_util unset
        self.assertEqual(led.rate(0), 1.0)
        self.assertEqual(led._used_by_others()[0], 1 << 30)

    def test_waits_for_its_neighbours(self):
        led = st.Ledger(self.dir, 0, util=1.0)
        slept = []
        real = st.time.sleep

        def sleep(dt):  # a neighbour comes after the third look
            slept.append(dt)
            if len(slept) == 3:
                self.neighbour(0, f"{1 << 30} 1.0")
        st.time.sleep = sleep
        try:
            self.assertEqual(led.wait_for(1, 60), 1)
            self.assertEqual(len(slept), 3)
            self.assertEqual(led.wait_for(2, 0), 1)  # not there in time: how many were
        finally:
            st.time.sleep = real


class WorkTest(unittest.TestCase):
    def test_work_takes_longer_at_a_lower_rate(self):
        slept = []
        real = st.time.sleep
        st.time.sleep = slept.append
        try:
            st.work(1.0, lambda: 0.5)
            at_half = sum(slept)
            slept.clear()
            rates = iter([1.0] * 10 + [0.25] * 1000)  # alone for half a second, then crowded
            st.work(1.0, lambda: next(rates))
        finally:
            st.time.sleep = real
        self.assertAlmostEqual(at_half, 2.0)
        self.assertAlmostEqual(sum(slept), 0.5 + 0.5 / 0.25)



class CurveTest(unittest.TestCase):
    def test_the_learning_rate_nearest_the_best_ends_best(self):
        finals = {lr: st.Curve({"learning_rate": lr, "sim_noise": 0}).value(1000) for lr in (1e-5, 1e-4, 1e-3, 1e-2)}
        self.assertEqual(min(finals, key=finals.get), 1e-3)
        # A factor of ten away is a whole unit of loss worse: clearly, not by noise.
        self.assertGreater(finals[1e-4] - finals[1e-3], 0.9)
        self.assertAlmostEqual(finals[1e-2], finals[1e-4])

    def test_it_falls_from_start_towards_final(self):
        c = st.Curve({"sim_final_loss": 0.5, "sim_start_loss": 3, "sim_noise": 0})
        self.assertEqual(c.value(0), 3)
        self.assertLess(abs(c.value(1000) - (0.5 + 2.5 * 0.0498)), 1e-3)
        self.assertGreater(c.value(100), c.value(500))

    def test_only_a_config_that_asks_has_a_curve(self):
        self.assertIsNone(st.Curve.of({"batch_size": 8, "seed": 1}))
        self.assertIsNotNone(st.Curve.of({"lr": 0.01}))
        self.assertIsNotNone(st.Curve.of({"sim_final_loss": 0.5}))

    def test_seeds_differ_and_repeat(self):
        a, b, a2 = (st.Curve({"seed": s}) for s in (1, 2, 1))
        self.assertNotEqual(a.value(100), b.value(100))
        self.assertEqual(a.value(100), a2.value(100))

    def test_evals_every_tenth_and_the_last(self):
        c = st.Curve({"sim_steps": 1050, "sim_eval_every": 100})
        self.assertEqual(c.evals(0, 250), [100, 200])
        self.assertEqual(c.evals(950, 1050), [1000, 1050])

    def test_report_appends_a_record(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics.jsonl")
            st.report(path, 100, {"eval_loss": 2.5})
            st.report(path, 200, {"eval_loss": 2.0})
            st.report("", 300, {"eval_loss": 1.0})  # no GPUQ_METRICS_FILE: nothing
            with open(path) as f:
                records = [json.loads(line) for line in f]
        self.assertEqual(records, [{"step": 100, "eval_loss": 2.5}, {"step": 200, "eval_loss": 2.0}])


if __name__ == "__main__":
    unittest.main()
