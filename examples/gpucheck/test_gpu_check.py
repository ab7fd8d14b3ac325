"""Tests of gpu_check.py's parsing and judging, on recorded outputs: `gpuq run --json`
summaries and attempt logs recorded from the check's three sweeps run by gpuq on two
simulated 24 GiB cards (the format is the same on real ones), and nvidia-smi's CSV as it
prints it. Standard library only; no GPU needed."""

import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check as gc  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
GiB = gc.GiB


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def recorded_runs():
    return {f"gpucheck-{s}": (1 if s == "caught" else 0, json.loads(data(f"run-{s}.json")))
            for s in ("oom", "torchrun", "caught")}


def nvml_as_gpuq(runs, ratio=1.02):
    """NVML peaks a little above gpuq's, as its finer sampling sees them."""
    return {gc.key(j, a): int(a["peak_bytes"] * ratio) for _, (_, s) in runs.items()
            for j, a in gc.attempts(s) if a["outcome"] == "success"}


GPUS = (0, data("gpus.txt"), "")


def verdicts(checks):
    return {name: ok for name, ok, _, _ in checks}


class ParseTest(unittest.TestCase):
    def test_cards(self):
        cards = gc.parse_cards(data("query-gpu.csv"))
        self.assertEqual(cards[1], (1, "GPU-77b0e2f4-1c3d-4a9e-b2f0-5d6c7e8f9a02", 40 * GiB))

    def test_compute_apps_not_available_is_none(self):
        apps = gc.parse_compute_apps(data("compute-apps.csv"))
        self.assertEqual(len(apps), 4)
        self.assertEqual(apps[0][1:], (4101, 10240 * gc.MiB))
        self.assertIsNone(apps[2][2])
        self.assertEqual(gc.parse_compute_apps("No running processes found\n"), [])

    def test_oom_text_is_the_last_oom_line(self):
        self.assertTrue(gc.oom_text(data("log-oom.txt")).startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB."))
        self.assertTrue(gc.oom_text(data("log-caught.txt")).startswith("caught: CUDA out of memory."))
        self.assertEqual(gc.oom_text("step 1\nKeyError: 'x'\n"), "")

    def test_plan_batch_fits_the_share(self):
        # 1 GiB that does not grow with the batch, 0.5 GiB a sample, a 40 GiB card.
        b = gc.plan_batch(40 * GiB, (1, 1.5 * GiB), (4, 3 * GiB))
        peak = 1 * GiB + b * 0.5 * GiB + 600 * gc.MiB
        self.assertLessEqual(peak, gc.TARGET_SHARE * 40 * GiB)
        self.assertGreater(peak + 0.5 * GiB, gc.TARGET_SHARE * 40 * GiB)
        self.assertEqual(gc.plan_batch(8 * GiB, (1, 7 * GiB), (4, 9 * GiB)), 1)


class SamplerTest(unittest.TestCase):
    """NVML's processes are told by the gpuq attempt they inherited, summed per card."""

    def test_peaks_by_attempt(self):
        proc = tempfile.mkdtemp()
        for pid, env in {4101: "GPUQ_JOB_ID=j.1\0GPUQ_ATTEMPT=2\0", 4102: "GPUQ_JOB_ID=j.1\0GPUQ_ATTEMPT=2\0",
                         4200: "GPUQ_JOB_ID=j.2\0GPUQ_ATTEMPT=1\0", 4300: "HOME=/\0"}.items():
            os.makedirs(os.path.join(proc, str(pid)))
            with open(os.path.join(proc, str(pid), "environ"), "w") as f:
                f.write(env)
        s = gc.Sampler(query=None, proc=proc)
        apps = gc.parse_compute_apps(data("compute-apps.csv"))
        s.add(apps)
        s.add([(apps[0][0], 4101, 1 * GiB)])  # a later, smaller reading keeps the peak
        self.assertEqual(s.peaks, {"j.1/2": (10240 + 9850) * gc.MiB})
        self.assertEqual(s.unknown, {"j.2/1"})
        self.assertEqual(s.hidden, {99999})
        # Attempts' PIDs were found here: 99999 ended before it was looked up.
        self.assertEqual(s.pids_hidden(), set())

    def test_pids_hidden_when_no_attempt_was_ever_found(self):
        proc = tempfile.mkdtemp()
        os.makedirs(os.path.join(proc, "4300"))
        with open(os.path.join(proc, "4300", "environ"), "w") as f:
            f.write("HOME=/\0")  # a process of this namespace, not an attempt
        s = gc.Sampler(query=None, proc=proc)
        s.add([("GPU-a", 4300, GiB), ("GPU-a", 99999, GiB)])
        self.assertEqual(s.pids_hidden(), {99999})


class JudgeTest(unittest.TestCase):
    def test_recorded_runs_pass(self):
        runs = recorded_runs()
        checks = gc.judge(GPUS, runs, nvml_as_gpuq(runs), set(), 2)
        self.assertEqual(len(checks), 7)
        self.assertTrue(all(ok for _, ok, _, _ in checks), gc.report(runs, {}, {}, checks))

    def fails(self, what, runs=None, nvml=None, hidden=frozenset(), gpus=GPUS, cards=2):
        runs = runs or recorded_runs()
        checks = gc.judge(gpus, runs, nvml_as_gpuq(runs) if nvml is None else nvml, set(hidden), cards)
        got = verdicts(checks)
        self.assertIn(what, got)
        self.assertFalse(got[what], f"{what} passed")
        self.assertEqual(sum(not ok for ok in got.values()), 1, got)

    def test_simulated_cards_fail(self):
        self.fails("gpus", gpus=(0, data("gpus.txt"), "gpuq: using SIMULATED GPUs sim:2x24GiB"))

    def test_a_failed_job_fails(self):
        runs = recorded_runs()
        job = runs["gpucheck-oom"][1]["jobs"][2]
        job["state"] = "failed"
        self.fails("oom-succeeded", runs=runs)

    def test_ooms_on_one_card_only_fail(self):
        self.fails("oom-every-card", cards=3)

    def test_an_unrecognised_oom_fails(self):
        runs = recorded_runs()
        runs["gpucheck-oom"][1]["jobs"][2]["attempts"][0]["oom"] = None
        self.fails("oom-recognised", runs=runs)

    def test_peaks_far_from_nvml_fail(self):
        runs = recorded_runs()
        self.fails("peaks", nvml=nvml_as_gpuq(runs, ratio=1.5))

    def test_an_unknown_peak_fails_where_nvml_saw_it(self):
        runs = recorded_runs()
        nvml = nvml_as_gpuq(runs)
        runs["gpucheck-torchrun"][1]["jobs"][0]["attempts"][0]["peak_unknown"] = True
        self.fails("peaks", runs=runs, nvml=nvml)

    def test_hidden_pids_want_unknown_peaks(self):
        runs = recorded_runs()
        self.fails("peaks", runs=runs, hidden={99999})
        for _, (_, s) in runs.items():
            for _, a in gc.attempts(s):
                a["peak_unknown"] = True
        checks = gc.judge(GPUS, runs, {}, {99999}, 2)
        self.assertTrue(all(ok for _, ok, _, _ in checks), gc.report(runs, {}, {}, checks))

    def test_torchrun_memory_not_counted_fails(self):
        runs = recorded_runs()
        runs["gpucheck-torchrun"][1]["jobs"][0]["attempts"][0]["peak_bytes"] = 0
        nvml = {k: v for k, v in nvml_as_gpuq(recorded_runs()).items() if not k.startswith("gpucheck-torchrun")}
        checks = gc.judge(GPUS, runs, nvml, set(), 2)
        got = verdicts(checks)
        self.assertFalse(got["torchrun"])

    def test_a_caught_oom_taken_for_an_oom_fails(self):
        runs = recorded_runs()
        caught = copy.deepcopy(runs["gpucheck-caught"][1])
        caught["jobs"][0]["attempts"][0]["outcome"] = "gpu-oom"
        runs["gpucheck-caught"] = (1, caught)
        self.fails("caught", runs=runs)

    def test_report_shows_both_peaks_texts_and_attempts(self):
        runs = recorded_runs()
        nvml = nvml_as_gpuq(runs)
        logs = {"gpucheck-oom.3/1": data("log-oom.txt"), "gpucheck-caught.1/1": data("log-caught.txt")}
        out = gc.report(runs, nvml, logs, gc.judge(GPUS, runs, nvml, set(), 2))
        self.assertIn("gpucheck-oom.3/2", out)
        self.assertIn("10.00 GiB  10.20 GiB", out)
        self.assertIn("gpucheck-oom.3/1: torch.OutOfMemoryError: CUDA out of memory.", out)
        self.assertIn("gpucheck-caught.1/1: caught: CUDA out of memory.", out)
        self.assertIn("gpucheck-oom.3             succeeded  gpu-oom success", out)
        self.assertEqual(out.count("PASS"), 7)


class UtilTest(unittest.TestCase):
    def summary(self, util, state="succeeded", outcome="success"):
        return {"jobs": [{"id": "gpucheck-util.1", "state": state, "attempts": [{"n": 1, "util": util, "outcome": outcome}]}]}

    def test_the_cards_figure_passes(self):
        name, ok, _, detail = gc.judge_util(self.summary(0.74), 73, 22)
        self.assertEqual(name, "util")
        self.assertTrue(ok, detail)
        self.assertIn("gpuq 0.74, the card 0.73, the process (pmon) 0.22", detail)

    def test_the_processs_figure_fails(self):
        self.assertFalse(gc.judge_util(self.summary(0.22), 73, 22)[1])
        # Within the tolerance of the card's, but nearer the process's.
        self.assertFalse(gc.judge_util(self.summary(0.62), 73, 60)[1])

    def test_figures_too_close_to_tell_pass_and_say_so(self):
        _, ok, _, detail = gc.judge_util(self.summary(0.68), 68, 67)
        self.assertTrue(ok, detail)
        self.assertIn("too close to tell", detail)

    def test_a_failed_trainer_fails(self):
        _, ok, _, detail = gc.judge_util(self.summary(0.57, "failed", "gpu-oom"), 70, 57)
        self.assertFalse(ok)
        self.assertIn("the job failed", detail)

    def test_nothing_measured_fails(self):
        self.assertFalse(gc.judge_util(self.summary(None), 73, None)[1])
        self.assertFalse(gc.judge_util({"jobs": []}, 73, None)[1])
        self.assertFalse(gc.judge_util(self.summary(0.7), None, None)[1])

    def test_the_sweep_runs_on_the_card(self):
        sweep = gc.util_sweep("python3", 2, 8, 9500)
        self.assertEqual(sweep["gpus"], "2")
        self.assertEqual((sweep["params"]["steps"], sweep["params"]["batch_size"]), (9500, 8))

    def test_a_step_is_timed_after_the_first(self):
        # The first step warms up for seconds; the run's whole time says nothing of a step.
        self.assertAlmostEqual(gc.step_seconds([(10.0, 1), (12.0, 2), (12.4, 3), (13.0, 4)], 3.0), 0.5)
        self.assertEqual(gc.step_seconds([(10.0, 1), (10.5, 2)], 3.0), 3.0)
        self.assertEqual(gc.step_seconds([], 3.0), 3.0)


    def test_a_batch_is_timed_once_a_card(self):
        runs = []

        def measure(python, card, batch, work):
            runs.append((card, batch))
            return 0, 0.01 * batch

        gc._step_seconds.clear()
        self.assertEqual(gc.steps_for(15, "python3", 0, 2, "w", measure), 750)
        self.assertEqual(gc.steps_for(30, "python3", 0, 2, "w", measure), 1500)
        self.assertEqual(gc.steps_for(15, "python3", 0, 4, "w", measure), 375)
        self.assertEqual(gc.steps_for(15, "python3", 1, 2, "w", measure), 750)
        self.assertEqual(runs, [(0, 2), (0, 4), (1, 2)])
        gc._step_seconds.clear()


class MPSCheckTest(unittest.TestCase):
    def summary(self, *states):
        return {"jobs": [{"id": f"gpucheck-mps.{i + 1}", "state": st, "attempts": []} for i, st in enumerate(states)]}

    def test_both_jobs_through_mps_pass(self):
        name, ok, _, detail = gc.judge_mps("mps", 0, self.summary("succeeded", "succeeded"), "[2026-11-27] MPS Server started\n")
        self.assertEqual(name, "mps")
        self.assertTrue(ok, detail)

    def test_a_failed_job_or_no_mps_server_fails(self):
        self.assertFalse(gc.judge_mps("mps", 1, self.summary("succeeded", "failed"), "log")[1])
        # The control daemon started, but no trainer reached it: no server ran.
        _, ok, _, detail = gc.judge_mps("mps", 0, self.summary("succeeded", "succeeded"), None)
        self.assertFalse(ok)
        self.assertIn("no MPS server ran", detail)
        self.assertFalse(gc.judge_mps("mps", 0, None, "log")[1])

    def test_the_sweep_shares_one_card_through_mps(self):
        sweep = gc.mps_sweep("python3", 1, 8, 900)
        self.assertEqual((sweep["sharing"], sweep["gpus"], sweep["gpu_plan"]), ("mps", "1", "2"))
        self.assertEqual(len(sweep["matrix"]["seed"]), 2)

    def test_no_mps_here_is_nothing_to_check(self):
        which, gc.shutil.which = gc.shutil.which, lambda name: None
        try:
            self.assertIsNone(gc.mps_check("gpuq", "python3", 0, tempfile.mkdtemp(), {}, 8))
        finally:
            gc.shutil.which = which


class NoGPUTest(unittest.TestCase):
    def test_exits_zero_saying_no_gpu_here(self):
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = tempfile.mkdtemp()  # no nvidia-smi
        try:
            import contextlib
            import io
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = gc.main(["--gpuq", "/nonexistent"])
        finally:
            os.environ["PATH"] = path
        self.assertEqual(code, 0)
        self.assertIn("no GPU here", out.getvalue())


if __name__ == "__main__":
    unittest.main()
