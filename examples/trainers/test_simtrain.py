"""Tests of simtrain.py's training curve, with the standard library alone."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simtrain as st  # noqa: E402


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
