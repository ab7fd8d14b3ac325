"""Tests of colocation.py, gpu_check.py's co-location part, on nvidia-smi's outputs as it
prints them and on a measurement made by hand in the shape it returns (testdata/
colocation.json: no card ran it). Standard library only; no GPU needed."""

import json
import os
import sys
import tempfile
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

    def test_time_slicing_s_hand_worked_cases(self):
        # Two half-busy trainers: each waits for the other's 47%, 1/1.47, though
        # processor sharing says they fit.
        self.assertEqual([round(v, 3) for v in co.predicted_sliced([0.47, 0.47])], [0.68, 0.68])
        # A light trainer beside a busy one: each waits as long as the lighter one
        # keeps the card busy.
        self.assertEqual([round(v, 3) for v in co.predicted_sliced([0.11, 0.76])], [0.901, 0.901])
        # Eight of them: processor sharing's 1/Σu is below 1/(1 + 7 × 0.47).
        self.assertEqual(round(co.predicted_sliced([0.47] * 8)[0], 3), 0.233)
        self.assertEqual(co.predicted_sliced([1, 1]), [0.5, 0.5])
        self.assertEqual(co.predicted_sliced([0.3]), [1.0])
        self.assertEqual(co.predicted_sliced([0, 0]), [1.0, 1.0])


class ParseTest(unittest.TestCase):
    def test_card_utilization(self):
        self.assertEqual(co.parse_card_util("87\n"), 87)
        self.assertIsNone(co.parse_card_util("[N/A]\n"))
        self.assertIsNone(co.parse_card_util(""))

    def test_pmon_gives_each_process_its_sm_share(self):
        self.assertEqual(co.parse_pmon(data("pmon.txt")), {4101: 47, 4102: 38})


class Clock:
    """A clock that tells the times it is set to."""

    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


class SamplerTest(unittest.TestCase):
    def test_means(self):
        s = co.UtilSampler(0, None, None, clock=Clock())
        s.add(90, {7: 40})
        s.add(None, {7: 60, 8: 30})
        s.add(70, {})
        self.assertEqual(s.card_mean(), 80)
        self.assertEqual(s.proc_mean(7), 50)
        self.assertIsNone(s.proc_mean(9))

    def test_means_over_a_window(self):
        # The trainer starts (an idle card), steps from t=10 to t=20, then ends.
        clock = Clock()
        s = co.UtilSampler(0, None, None, clock=clock)
        for t, card, sm in ((0, 0, 0), (5, 0, 0), (10, 80, 70), (15, 90, 80), (20, 70, 60), (25, 0, 0)):
            clock.t = t
            s.add(card, {7: sm})
        self.assertEqual(s.card_mean(10, 20), 80)
        self.assertEqual(s.proc_mean(7, 10, 20), 70)
        self.assertEqual(s.card_mean(), 40)  # what the whole run's mean would have said
        self.assertIsNone(s.proc_mean(7, 30, 40))


class ProgressTest(unittest.TestCase):
    LINES = ["train_torch: NVIDIA H200; 4 layers\n",
             "train:   5%|          | 10/200 [00:01<00:19, 9.50it/s, loss=10.2]\n",
             "a warning\n",
             "train:  10%|█         | 20/200 [00:02<00:18, 9.80it/s, loss=9.9]\n",
             "train: 100%|██████████| 200/200 [00:20<00:00, 10.00it/s, loss=3.1]\n"]

    def read(self, lines, times):
        clock = Clock()
        times = iter(times)

        def stream():
            for line in lines:
                clock.t = next(times)
                yield line
        p = co.Progress(stream(), clock)
        p.start()
        p.join()
        return p

    def test_progress_lines_are_timed_steps(self):
        p = self.read(self.LINES, [1, 5, 6, 7, 25])
        self.assertEqual(p.points, [(5, 10), (7, 20), (25, 200)])

    def test_the_window_is_while_every_trainer_steps(self):
        a = self.read(self.LINES, [1, 5, 6, 7, 25])
        b = self.read(self.LINES, [1, 8, 9, 10, 40])
        self.assertEqual(co.stepping([a, b]), (8, 25))
        self.assertIsNone(co.stepping([a, self.read(self.LINES[:1], [1])]))

    def test_rate_between_takes_the_lines_inside(self):
        points = [(5, 10), (7, 20), (15, 100), (25, 200)]
        self.assertEqual(co.rate_between(points, 6, 25), (200 - 20) / (25 - 7))
        self.assertEqual(co.rate_between(points, 0, 100), (200 - 10) / (25 - 5))
        self.assertIsNone(co.rate_between(points, 8, 20))  # one line inside

    def test_run_together_times_a_trainer_by_its_progress(self):
        # An interpreter that stands in for python3 and train_torch.py: three progress lines.
        work = tempfile.mkdtemp()
        fake = os.path.join(work, "python")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nfor s in 10 20 30; do echo \"train: x%| | $s/30 [00:01<00:01]\"; done\n")
        os.chmod(fake, 0o755)
        ticks = iter(range(100))
        sampler = co.UtilSampler(0, None, None, clock=lambda: next(ticks))
        sampler.start = sampler.stop = lambda: None  # no nvidia-smi here
        (r,), card = co.run_together(fake, 0, work, [{}], sampler=sampler)
        self.assertEqual(r["rate"], 10.0)  # 20 steps over two ticks
        self.assertIsNone(r["util"])
        self.assertIsNone(card)


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
        self.assertIn("a             10.00   45%   46%          8.30   0.83         0.87         0.83", out)
        self.assertIn("b              6.00   70%   70%          4.80   0.80         0.87         0.83", out)
        m = self.measurement()
        m["card_alone"][0], m["card_together"] = None, None
        self.assertIn("a             10.00   45%     -", co.report(m))
        self.assertIn("card utilization together: -;", co.report(m))
        self.assertIn("card utilization together: 99%; model error (c=0.00): 0.055; model error (c=0.05): 0.015", out)

    def test_by_card_is_the_model_from_the_cards_figures(self):
        # As an H200 showed the check's pair: pmon gave 18% and 26% alone, the card 73%
        # and 76%; together they ran at 0.55 and 0.59. From the cards' figures the model
        # says 0.95 / 1.49 = 0.64, from pmon's 0.95.
        m = {"alone": [{"rate": 23.56, "util": 18}, {"rate": 12.71, "util": 26}],
             "together": [{"rate": 12.88, "util": None}, {"rate": 7.47, "util": None}],
             "card_alone": [73, 76], "card_together": 88}
        out = co.report(m)
        self.assertIn("a             23.56   18%   73%         12.88   0.55         1.00         0.95     0.64", out)
        self.assertIn("b             12.71   26%   76%          7.47   0.59         1.00         0.95     0.64", out)
        self.assertIn("model error (c=0.05): 0.383; by the cards' figures (c=0.05): 0.070", out)
        # Time slicing from the cards' figures: each waits for the other's 73%, 1/1.73.
        self.assertIn("0.95     0.64    0.58", out)
        self.assertIn("time slicing (SLICED), by the cards' figures: 0.021", out)

    def test_report_under_mps(self):
        m = {"alone": [{"rate": 20.0, "util": None}, {"rate": 10.0, "util": None}],
             "together": [], "card_alone": [50, 50], "card_together": 90}
        out = co.report_mps(m, {"together": [{"rate": 18.0, "util": None}, {"rate": 9.5, "util": None}], "card_together": 97})
        # Processor sharing says both fit (1.00), time slicing 1/1.5.
        self.assertIn("a                18.00   0.90        1.00    0.67", out)
        self.assertIn("b                 9.50   0.95        1.00    0.67", out)
        self.assertIn("card utilization together: 97%; error of processor sharing: 0.075; of time slicing: 0.258", out)

    def test_judge(self):
        m = self.measurement()
        self.assertTrue(co.judge(m)[1])
        m["together"][1]["rate"] = 0
        self.assertFalse(co.judge(m)[1])
        m = self.measurement()
        m["alone"][1]["util"], m["card_alone"][1] = None, None  # NVML told nothing
        self.assertFalse(co.judge(m)[1])


class MPSTest(unittest.TestCase):
    class Run:
        """Stands in for subprocess.run: records each command, answers with rc."""

        def __init__(self, rc=0, missing=False):
            self.calls, self.rc, self.missing = [], rc, missing

        def __call__(self, argv, input=None, capture_output=None, text=None, env=None):
            if self.missing:
                raise FileNotFoundError(2, "No such file or directory", argv[0])
            self.calls.append((argv, input, env))

            class R:
                returncode, stdout, stderr = self.rc, "", "cannot start"
            return R()

    def test_started_with_directories_of_its_own_and_stopped(self):
        run = self.Run()
        mps = co.MPS(tempfile.mkdtemp(), run)
        mps.start()
        mps.stop()
        (start, _, env), (stop, quit, _) = run.calls
        self.assertEqual(start, [co.MPS_CONTROL, "-d"])
        self.assertEqual(stop, [co.MPS_CONTROL])
        self.assertEqual(quit, "quit\n")
        for name in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            self.assertEqual(env[name], mps.env[name])
            self.assertTrue(os.path.isdir(mps.env[name]))

    def test_one_that_cannot_start_says_why(self):
        with self.assertRaisesRegex(RuntimeError, "exited with status 1: cannot start"):
            co.MPS(tempfile.mkdtemp(), self.Run(rc=1)).start()
        with self.assertRaisesRegex(RuntimeError, "No such file"):
            co.MPS(tempfile.mkdtemp(), self.Run(missing=True)).start()


if __name__ == "__main__":
    unittest.main()
