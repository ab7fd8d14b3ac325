#!/usr/bin/env python3
"""A simulated trainer: behaves like a PyTorch training script towards gpuq, with no GPU.

It reads the config gpuq rendered (JSON, or the flat `key: value` YAML gpuq writes for
simple params), holds memory on the simulated card named by CUDA_VISIBLE_DEVICES through
the ledger that gpuq's simulated NVML reads, prints tqdm-like progress, and when the card
cannot hold what it needs, prints PyTorch 2.x's out-of-memory traceback and exits 1, as
a real trainer does: through Module.to when the weights do not fit, from the backward
pass when the activations do not.

Memory model (the same physics as `gpuq simulate`; README, "Simulated trainers"):
  peak        = sim_base + activations
  activations = sim_activations * (batch_size / sim_batch) * (0.35 if gradient_checkpointing)
  duration    = sim_seconds * (1.08 if gradient_checkpointing)
                            * 1.15 ** log2(sim_batch / batch_size)   (more, smaller micro-batches)
                            * (1.2 if num_data_workers == 0)
sim_base and sim_activations are sizes ("3.5GiB"); sim_batch is the batch_size the
activations figure was measured at. Set it to the sweep's batch_size: the ladder halves
batch_size and leaves sim_batch, so that the activations halve with the batch. Without
it (default: batch_size, whatever the tier), a halved batch holds as much as the whole
did, and a trainer started below tier 0 says so on stderr. The weights (sim_base) are
allocated at start, the activations after sim_alloc_delay seconds (default 1), which is
when an OOM happens.

Compute model (the same as `gpuq simulate`'s): sim_gpu_util (0 to 1, default 0) is the
share of its card's compute the trainer keeps busy alone; duration is its time alone.
On a card where k trainers' utilizations add up to U, each progresses at
    rate = min(1, 1/U) * (1 - sim_colocation_cost) ** (k - 1)
of its speed alone (sim_colocation_cost default 0), re-read from the ledger as it
goes, so that its steps slow down while it shares its card and speed up when it is left
alone. With sim_wait_neighbours n (default 0), it holds its memory and waits before its
first step until n other trainers hold memory on its card, and fails after a minute
without them: trainers started side by side then train side by side, however long each
python takes to start on a loaded machine, so that the slowdown they show is certain.

Training curve (the same model as a trace's curve in `gpuq simulate`; README,
"Simulated trainers"), for a config with learning_rate (or lr) or sim_final_loss: reported
to GPUQ_METRICS_FILE as eval_loss every sim_eval_every steps (default a tenth) of
sim_steps (default 1000), the steps at an even pace over the run:
  eval_loss(step) = final + (start - final) * exp(-3 * step / sim_steps) + noise
  final = sim_final_loss, or 1 + |log10(learning_rate / sim_best_lr)|
  start = sim_start_loss (default final + 2);  noise ~ N(0, sim_noise), drawn from seed and step
The learning rate nearest sim_best_lr (default 1e-3) ends best, each factor of ten away a
whole unit of loss worse.

Ledger: <GPUQ_SIM_LEDGER>/<card>-<pid> holds this process's bytes on that card and, after
a blank, its sim_gpu_util; the directory's `lock` file is flock()ed while checking room
and writing. Capacities come from GPUQ_SIM_CAPACITY, one per card of the mask.

Standard library only.
"""
import argparse
import fcntl
import json
import math
import os
import random
import re
import signal
import sys
import time

UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_size(v):
    if isinstance(v, (int, float)):
        return int(v)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", str(v))
    if not m or m.group(2).lower() not in UNITS:
        raise SystemExit(f"simtrain: {v!r} is not a size such as 3.5GiB")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def fmt(b):
    """Bytes as PyTorch prints them."""
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b / n:.2f} {unit}"
    return f"{b} bytes"


def load_config(path):
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError:
        pass
    cfg = {}  # the flat YAML gpuq writes for scalar params; nested keys are not needed here
    for line in text.splitlines():
        if not line or line.startswith((" ", "#")) or ":" not in line:
            continue
        k, v = line.split(":", 1)
        v = v.strip().strip('"').strip("'")
        if v in ("true", "false"):
            cfg[k] = v == "true"
        else:
            try:
                cfg[k] = int(v)
            except ValueError:
                try:
                    cfg[k] = float(v)
                except ValueError:
                    cfg[k] = v
    return cfg


class Ledger:
    def __init__(self, directory, card, util=0.0):
        self.dir, self.card, self.pid, self.util = directory, card, os.getpid(), util
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{card}-{self.pid}")
        self.held = 0

    def _neighbours(self):
        """[(pid, bytes, utilization)] of the other live processes on this card."""
        out = []
        for name in os.listdir(self.dir):
            m = re.fullmatch(r"(\d+)-(\d+)", name)
            if not m or int(m.group(1)) != self.card or int(m.group(2)) == self.pid:
                continue
            pid = int(m.group(2))
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            except PermissionError:
                pass
            try:
                with open(os.path.join(self.dir, name)) as f:
                    fields = f.read().split()
                b = int(fields[0]) if fields else 0
                u = float(fields[1]) if len(fields) > 1 else 0.0
            except (OSError, ValueError):
                continue
            out.append((pid, b, u))
        return out

    def _used_by_others(self):
        others = [(pid, b) for pid, b, _ in self._neighbours()]
        return sum(b for _, b in others), others

    def wait_for(self, n, limit):
        """Waits until n other live trainers are on this card, for limit seconds at most;
        returns how many there are."""
        end = time.monotonic() + limit
        seen = len(self._neighbours())
        while seen < n and time.monotonic() < end:
            time.sleep(0.05)
            seen = len(self._neighbours())
        return seen

    def rate(self, cost):
        """The share of its speed alone this trainer progresses at now."""
        utils = [u for _, _, u in self._neighbours()] + [self.util]
        return min(1.0, 1.0 / max(sum(utils), 1e-9)) * (1 - cost) ** (len(utils) - 1)

    def allocate(self, nbytes, capacity):
        """Hold nbytes more, or return (False, facts) when the card cannot."""
        with open(os.path.join(self.dir, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used, others = self._used_by_others()
            if used + self.held + nbytes > capacity:
                return False, (capacity - used - self.held, others)
            self._write(self.held + nbytes)
        return True, None

    def _write(self, nbytes):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{nbytes} {self.util}")
        os.replace(tmp, self.path)
        self.held = nbytes

    def release(self):
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        self.held = 0


# Where each allocation runs out, as PyTorch's traceback shows it: the weights as the
# model moves onto the card (Module.to), the activations in the backward pass.
FRAMES = {
    "weights": '  File "simtrain.py", line 1, in <module>\n'
               "    model = model.to(device)\n"
               '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1355, in to\n'
               "    return self._apply(convert)\n"
               '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 915, in _apply\n'
               "    module._apply(fn)\n",
    "activations": '  File "simtrain.py", line 1, in <module>\n'
                   "    loss.backward()\n",
}


def oom_text(tried, capacity, free, held, others, where):
    procs = "".join(f"Process {pid} has {fmt(b)} memory in use. " for pid, b in others)
    return (
        "Traceback (most recent call last):\n"
        + FRAMES[where] +
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {fmt(tried)}. "
        f"GPU 0 has a total capacity of {fmt(capacity)} of which {fmt(max(free, 0))} is free. "
        f"{procs}Including non-PyTorch memory, this process has {fmt(held)} memory in use. "
        f"Of the allocated memory {fmt(held)} is allocated by PyTorch, and 0 bytes is reserved by "
        "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
        "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
    )


def plan(cfg):
    """Peak bytes and duration in seconds for this config: the model in the docstring."""
    batch = int(cfg.get("batch_size", 1))
    ref = int(cfg.get("sim_batch", batch))
    if "sim_batch" not in cfg and os.environ.get("GPUQ_TIER", "0") not in ("", "0"):
        print("simtrain: no sim_batch in the config: a batch_size the ladder halves holds as "
              "much as the whole (set sim_batch to the sweep's batch_size)", file=sys.stderr)
    gc = bool(cfg.get("gradient_checkpointing", False))
    act = parse_size(cfg.get("sim_activations", "0B")) * batch / ref * (0.35 if gc else 1.0)
    base = parse_size(cfg.get("sim_base", "1GiB"))
    secs = float(cfg.get("sim_seconds", 5))
    secs *= 1.08 if gc else 1.0
    secs *= 1.15 ** math.log2(ref / batch) if batch < ref else 1.0
    secs *= 1.2 if int(cfg.get("num_data_workers", 1)) == 0 else 1.0
    return base, int(act), secs


def work(seconds, rate, tick=0.05):
    """Does `seconds` of work at speed alone, at rate() of that speed, asked again every
    tick: the time a step takes on a card it shares."""
    done = 0.0
    while done < seconds:
        r = max(rate(), 1e-3)
        dt = min(tick, (seconds - done) / r)
        time.sleep(dt)
        done += dt * r


class Curve:
    """The simulated training curve of a config: the model in the docstring."""

    @staticmethod
    def of(cfg):
        """The config's curve; None for one that asks for none."""
        if not any(k in cfg for k in ("learning_rate", "lr", "sim_final_loss")):
            return None
        return Curve(cfg)

    def __init__(self, cfg):
        best = float(cfg.get("sim_best_lr", 1e-3))
        lr = float(cfg.get("learning_rate", cfg.get("lr", best)))
        self.final = float(cfg.get("sim_final_loss", 1 + abs(math.log10(lr / best))))
        self.start = float(cfg.get("sim_start_loss", self.final + 2))
        self.steps = int(cfg.get("sim_steps", 1000))
        self.every = int(cfg.get("sim_eval_every", max(1, self.steps // 10)))
        self.noise = float(cfg.get("sim_noise", 0.02))
        self.seed = cfg.get("seed", 0)

    def value(self, step):
        """The loss at a step; its noise is drawn from the seed and the step alone."""
        v = self.final + (self.start - self.final) * math.exp(-3 * step / self.steps)
        return v + (random.Random(f"{self.seed}/{step}").gauss(0, self.noise) if self.noise > 0 else 0)

    def evals(self, before, upto):
        """The steps after before, up to upto, at which the loss is reported."""
        return [s for s in range(before + 1, upto + 1) if s % self.every == 0 or s == self.steps]


def report(path, step, metrics):
    """Appends one record to the metrics file gpuq reads (GPUQ_METRICS_FILE), if any."""
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"step": step, **metrics}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    args, _ = ap.parse_known_args()
    cfg = load_config(args.config)
    base, act, secs = plan(cfg)

    mask = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    ledger_dir = os.environ.get("GPUQ_SIM_LEDGER")
    if not mask or not ledger_dir:
        raise SystemExit("simtrain: run me under gpuq on a simulated machine (CUDA_VISIBLE_DEVICES and GPUQ_SIM_LEDGER unset)")
    card = int(mask.split(",")[0])
    capacity = int(os.environ.get("GPUQ_SIM_CAPACITY", "0").split(",")[0]) or (24 << 30)
    util = float(cfg.get("sim_gpu_util", 0))
    cost = float(cfg.get("sim_colocation_cost", 0))
    neighbours = int(cfg.get("sim_wait_neighbours", 0))
    if not 0 <= util <= 1 or not 0 <= cost < 1:
        raise SystemExit(f"simtrain: sim_gpu_util must be from 0 to 1 and sim_colocation_cost from 0 to below 1 (got {util}, {cost})")
    ledger = Ledger(ledger_dir, card, util)

    def stop(signum, _frame):
        ledger.release()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        print(f"simtrain: card {card}, batch_size {cfg.get('batch_size')}, "
              f"gradient_checkpointing {cfg.get('gradient_checkpointing')}, peak {fmt(base + act)}", flush=True)
        for need, where in ((base, "weights"), (act, "activations")):
            ok, facts = ledger.allocate(need, capacity)
            if not ok:
                free, others = facts
                sys.stdout.write(oom_text(need, capacity, free, ledger.held, others, where))
                sys.stdout.flush()
                return 1
            time.sleep(float(cfg.get("sim_alloc_delay", 1)) if where == "weights" else 0)
        if neighbours:
            waited = time.monotonic()
            seen = ledger.wait_for(neighbours, 60)
            if seen < neighbours:
                print(f"simtrain: after 60 s, card {card} has {seen} of the {neighbours} other "
                      "trainers that sim_wait_neighbours waits for", flush=True)
                return 1
            print(f"simtrain: card {card} shared with {seen} other trainer{'s' if seen > 1 else ''} "
                  f"after {time.monotonic() - waited:.1f} s", flush=True)
        steps = 20
        tty = sys.stdout.isatty()
        start = time.time()
        curve, done = Curve.of(cfg), 0
        for i in range(1, steps + 1):
            work(secs / steps, lambda: ledger.rate(cost))
            if curve:
                for s in curve.evals(done, curve.steps * i // steps):
                    report(os.environ.get("GPUQ_METRICS_FILE"), s, {"eval_loss": round(curve.value(s), 4)})
                done = curve.steps * i // steps
            el = time.time() - start
            bar = "█" * (i * 10 // steps) + " " * (10 - i * 10 // steps)
            line = f"train: {i * 100 // steps:3d}%|{bar}| {i}/{steps} [{el:05.1f}s, {i / el:.2f}it/s]"
            print(("\r" + line) if tty else line, end="" if tty and i < steps else "\n", flush=True)
        print(f"eval accuracy: {0.80 + (hash(args.config) % 100) / 1000:.3f}", flush=True)
        return 0
    finally:
        ledger.release()


if __name__ == "__main__":
    sys.exit(main())
