"""Tests of colocation.py, gpu_check.py's co-location part, on nvidia-smi's outputs as it
prints them and on a measurement made by hand in the shape it returns (testdata/
colocation.json: no card ran it). Standard library only; no GPU needed."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colocation as co  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


class ModelTest(unittest.TestCase):
    def test_the_models_hand_worked_cases(self):
        self.assertEqual(co.predicted_speed([0.5, 0.5], 0), 1.0)
        self.assertEqual(co.predicted_speed([1, 1], 0), 0.5)
        self.assertAlmostEqual(co.predicted_speed([1, 1], 0.05), 0.475)
        self.assertEqual(co.predicted_speed([0.3], 0.05), 1.0)


class ParseTest(unittest.TestCase):
    def test_card_utilization(self):
        self.assertEqual(co.parse_card_util("87\n"), 87)
        self.assertIsNone(co.parse_card_util("[N/A]\n"))
        self.assertIsNone(co.parse_card_util(""))

    def test_pmon_gives_each_process_its_sm_share(self):
        self.assertEqual(co.parse_pmon(data("pmon.txt")), {4101: 47, 4102: 38})


class SamplerTest(unittest.TestCase):
    def test_means(self):
        s = co.UtilSampler(0, None, None)
        s.add(90, {7: 40})
        s.add(None, {7: 60, 8: 30})
        s.add(70, {})
        self.assertEqual(s.card_mean(), 80)
        self.assertEqual(s.proc_mean(7), 50)
        self.assertIsNone(s.proc_mean(9))


class ReportTest(unittest.TestCase):
    def measurement(self):
        return json.loads(data("colocation.json"))

    def test_utilization_alone_is_the_process_s_else_the_card_s(self):
        m = self.measurement()
        self.assertEqual(co.util_alone(m, 0), 0.45)
        self.assertEqual(co.util_alone(m, 1), 0.70)

    def test_report_shows_rates_utilizations_and_the_model(self):
        out = co.report(self.measurement())
        # Together they ask 115% of the card: the model says 1/1.15 = 0.87, and with a
        # cost of 5% 0.83; a ran at 0.83, b at 0.80.
        self.assertIn("a             10.00   45%          8.30   0.83         0.87         0.83", out)
        self.assertIn("b              6.00   70%          4.80   0.80         0.87         0.83", out)
        self.assertIn("card utilization together: 99%; model error (c=0.00): 0.055; model error (c=0.05): 0.015", out)

    def test_judge(self):
        m = self.measurement()
        self.assertTrue(co.judge(m)[1])
        m["together"][1]["rate"] = 0
        self.assertFalse(co.judge(m)[1])
        m = self.measurement()
        m["alone"][1]["util"], m["card_alone"][1] = None, None  # NVML told nothing
        self.assertFalse(co.judge(m)[1])


if __name__ == "__main__":
    unittest.main()
