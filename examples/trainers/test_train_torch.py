"""Tests of train_torch.py. The config handling needs only the standard library; one
tiny CPU training run needs a Python with PyTorch (CI installs Debian's python3-torch)
and is skipped, saying so, where there is none."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_torch as tt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class ConfigTest(unittest.TestCase):
    def test_defaults_fill_and_other_keys_are_ignored(self):
        cfg = tt.settle({"batch_size": 2, "task": "glue-sst2", "sim_base": "3GiB"})
        self.assertEqual(cfg["batch_size"], 2)
        self.assertEqual(cfg["gradient_accumulation_steps"], tt.DEFAULTS["gradient_accumulation_steps"])
        self.assertNotIn("task", cfg)

    def test_every_ladder_rung_keeps_the_effective_batch(self):
        written = tt.settle({"batch_size": 8, "gradient_accumulation_steps": 4})
        halved = tt.settle({"batch_size": 4, "gradient_accumulation_steps": 8, "gradient_checkpointing": True})
        alone = tt.settle({"batch_size": 4, "gradient_accumulation_steps": 8, "num_data_workers": 0})
        self.assertEqual({tt.effective_batch(c) for c in (written, halved, alone)}, {32})
        self.assertIn("checkpointing on", tt.describe(halved))
        self.assertIn("0 data workers", tt.describe(alone))

    def test_lr_may_be_written_as_an_integer(self):
        self.assertEqual(tt.settle({"lr": 1})["lr"], 1.0)

    def test_bad_values_are_all_named(self):
        bad = {
            "batch_size": 0,
            "gradient_checkpointing": "yes",
            "d_model": 100,
            "n_heads": 3,
            "precision": "fp8",
            "logits_to_keep": 999,
            "num_data_workers": -1,
        }
        with self.assertRaises(tt.ConfigError) as e:
            tt.settle(bad)
        # Types first: a wrong type stops the range checks, which would misread it.
        self.assertIn("gradient_checkpointing: 'yes' is not true or false", str(e.exception))
        bad.pop("gradient_checkpointing")
        with self.assertRaises(tt.ConfigError) as e:
            tt.settle(bad)
        for want in ("batch_size: 0 must be at least 1", "d_model: 100 must be a multiple of n_heads (3)",
                     "precision: 'fp8'", "logits_to_keep: 999", "num_data_workers: -1"):
            self.assertIn(want, str(e.exception))

    def test_a_float_is_not_a_batch(self):
        with self.assertRaises(tt.ConfigError) as e:
            tt.settle({"batch_size": 2.5})
        self.assertIn("batch_size: 2.5 is not a whole number", str(e.exception))

    def test_load_config_reads_json_and_refuses_a_list(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(tt.load_config(write(d, "c.json", '{"batch_size": 4}')), {"batch_size": 4})
            with self.assertRaises(tt.ConfigError):
                tt.load_config(write(d, "l.json", "[1, 2]"))

    def test_main_exits_2_on_a_bad_config(self):
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(tt.main(["--config", write(d, "c.json", '{"batch_size": -4}')]), 2)
            self.assertEqual(tt.main(["--config", os.path.join(d, "missing.json")]), 2)
        self.assertIn("train_torch: batch_size: -4 must be at least 1", err.getvalue())


class DataTest(unittest.TestCase):
    def test_progressions_are_deterministic_and_arithmetic(self):
        a = tt.progression(7, 3, 10, 50)
        self.assertEqual(a, tt.progression(7, 3, 10, 50))
        self.assertNotEqual(a, tt.progression(7, 4, 10, 50))
        step = (a[1] - a[0]) % 50
        self.assertTrue(all((a[i + 1] - a[i]) % 50 == step for i in range(9)))
        self.assertTrue(all(0 <= t < 50 for t in a))

    def test_progress_line(self):
        self.assertEqual(tt.progress_line(40, 100, 5.0, 3.21),
                         "train:  40%|████      | 40/100 [00:05<00:07, 8.00it/s, loss=3.2100]")


def python_with_torch():
    """A Python that can import torch: this one, or the system's (Debian's python3-torch
    installs for /usr/bin/python3, which a pyenv or venv python3 does not see)."""
    for exe in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if exe and os.path.exists(exe) and subprocess.run([exe, "-c", "import torch"],
                                                          capture_output=True).returncode == 0:
            return exe
    return None


TORCH = python_with_torch()


@unittest.skipUnless(TORCH, "no Python with PyTorch: the CPU training run is skipped (CI installs python3-torch)")
class TrainTest(unittest.TestCase):
    def run_config(self, **overrides):
        cfg = {"batch_size": 4, "gradient_accumulation_steps": 2, "max_length": 16, "n_layers": 2, "d_model": 32,
               "n_heads": 2, "vocab_size": 64, "steps": 3, "dataset_size": 64, "eval_batches": 1, "num_data_workers": 0}
        cfg.update(overrides)
        with tempfile.TemporaryDirectory() as d:
            path = write(d, "config.json", json.dumps(cfg))
            p = subprocess.run([TORCH, os.path.join(HERE, "train_torch.py"), "--config", path],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("final: eval_loss=", p.stdout)
            with open(os.path.join(d, "metrics.json")) as f:
                return json.load(f)

    def test_each_rung_trains_on_the_cpu(self):
        written = self.run_config()
        degraded = self.run_config(batch_size=2, gradient_accumulation_steps=4, gradient_checkpointing=True,
                                   num_data_workers=1, logits_to_keep=4)
        self.assertEqual(written["effective_batch"], degraded["effective_batch"])
        for m in (written, degraded):
            self.assertTrue(0 < m["eval_loss"] < 20, m)


if __name__ == "__main__":
    unittest.main()
