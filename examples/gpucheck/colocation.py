"""The co-location part of gpuq's GPU check: two train_torch.py trainers on one card,
each alone, then both together. It prints their step rates and NVML's utilizations
beside what gpuq's sharing model predicts (README, "Simulated trainers"):

    each of k trainers on a card runs at min(1, 1/sum(u)) * (1 - c)**(k - 1) of its speed
    alone, u being the share of the card each keeps busy alone (GPU-Util)

so that the first run on a real card calibrates the model: u as NVML measures it, c as
the speeds show it. Standard library only; nvidia-smi and PyTorch are only needed by
run()."""

import json
import os
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_TORCH = os.path.join(HERE, "..", "trainers", "train_torch.py")
COSTS = (0.0, 0.05)


def predicted_speed(utils, cost):
    """The model's speed of each of the trainers sharing a card, as a share of its speed
    alone, from their utilizations alone (0 to 1)."""
    total = sum(utils)
    return min(1.0, 1.0 / total if total > 0 else 1.0) * (1 - cost) ** (len(utils) - 1)


def parse_card_util(text):
    """`nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i N`: percent,
    or None ("[N/A]")."""
    v = text.strip().splitlines()[0].strip() if text.strip() else ""
    return int(v) if v.isdigit() else None


def parse_pmon(text):
    """`nvidia-smi pmon -c 1 -s u -i N`: {pid: SM percent}; a "-" is no reading."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if not f or line.lstrip().startswith("#") or len(f) < 4 or not f[1].isdigit():
            continue
        if f[3].isdigit():
            out[int(f[1])] = int(f[3])
    return out


class Poller:
    """Calls poll() every `every` seconds in the background, from start() until stop()."""

    def __init__(self, poll, every):
        self.poll, self.every = poll, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.every)


class UtilSampler(Poller):
    """Samples a card's utilization, and each process's SM utilization, in the
    background, and keeps their means."""

    def __init__(self, card, query_card, query_procs, every=0.5):
        super().__init__(lambda: self.add(query_card(card), query_procs(card)), every)
        self.card_samples, self.proc_samples = [], {}

    def add(self, card_util, procs):
        if card_util is not None:
            self.card_samples.append(card_util)
        for pid, sm in procs.items():
            self.proc_samples.setdefault(pid, []).append(sm)

    def card_mean(self):
        return sum(self.card_samples) / len(self.card_samples) if self.card_samples else None

    def proc_mean(self, pid):
        s = self.proc_samples.get(pid)
        return sum(s) / len(s) if s else None


def nvidia_smi_card(card):
    r = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", str(card)],
                       capture_output=True, text=True)
    return parse_card_util(r.stdout) if r.returncode == 0 else None


def nvidia_smi_pmon(card):
    r = subprocess.run(["nvidia-smi", "pmon", "-c", "1", "-s", "u", "-i", str(card)], capture_output=True, text=True)
    return parse_pmon(r.stdout) if r.returncode == 0 else {}


def run_together(python, card, work, configs, sampler=None):
    """Runs a train_torch.py of each config on one card at once; returns, for each, its
    steps a second and NVML's mean utilization of its process (None where pmon gave
    none), and the card's mean utilization."""
    sampler = sampler or UtilSampler(card, nvidia_smi_card, nvidia_smi_pmon)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(card), CUDA_DEVICE_ORDER="PCI_BUS_ID")
    procs = []
    for cfg in configs:
        d = tempfile.mkdtemp(dir=work)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        procs.append((d, subprocess.Popen([python, TRAIN_TORCH, "--config", os.path.join(d, "config.json")], env=env,
                                          stdout=subprocess.DEVNULL)))
    sampler.start()
    try:
        for _, p in procs:
            p.wait()
    finally:
        sampler.stop()
    out = []
    for d, p in procs:
        if p.returncode != 0:
            raise RuntimeError(f"train_torch.py exited with status {p.returncode} ({d})")
        with open(os.path.join(d, "metrics.json")) as f:
            m = json.load(f)
        out.append({"rate": m["steps"] / m["seconds"], "util": sampler.proc_mean(p.pid)})
    return out, sampler.card_mean()


def measure(python, card, work, configs):
    """Each config alone, then all together: {"alone": [...], "together": [...],
    "card_alone": [...], "card_together": x}."""
    alone, card_alone = [], []
    for cfg in configs:
        (r,), c = run_together(python, card, work, [cfg])
        alone.append(r)
        card_alone.append(c)
    together, card_together = run_together(python, card, work, configs)
    return {"alone": alone, "together": together, "card_alone": card_alone, "card_together": card_together}


def util_alone(m, i):
    """Trainer i's utilization alone (0 to 1): its process's, else the card's while it
    ran alone."""
    u = m["alone"][i]["util"]
    if u is None:
        u = m["card_alone"][i]
    return (u or 0) / 100


def report(m, names=("a", "b")):
    """The step rates and utilizations beside the model's speeds, and the model's error."""
    utils = [util_alone(m, i) for i in range(len(names))]
    lines = ["", "co-location: two train_torch.py trainers on one card, each alone, then together",
             f"{'TRAINER':8} {'ALONE it/s':>10} {'UTIL':>5} {'TOGETHER it/s':>13} {'SPEED':>6} "
             + " ".join(f"{'MODEL c=' + format(c, '.2f'):>12}" for c in COSTS)]
    errors = {c: [] for c in COSTS}
    for i, name in enumerate(names):
        alone, together = m["alone"][i]["rate"], m["together"][i]["rate"]
        speed = together / alone if alone > 0 else 0
        preds = [predicted_speed(utils, c) for c in COSTS]
        for c, p in zip(COSTS, preds):
            errors[c].append(abs(p - speed))
        lines.append(f"{name:8} {alone:>10.2f} {100 * utils[i]:>4.0f}% {together:>13.2f} {speed:>6.2f} "
                     + " ".join(f"{p:>12.2f}" for p in preds))
    card = m["card_together"]
    lines.append(f"card utilization together: {'-' if card is None else format(card, '.0f') + '%'}; "
                 + "; ".join(f"model error (c={c:.2f}): {sum(e) / len(e):.3f}" for c, e in errors.items()))
    return "\n".join(lines)


def judge(m):
    """(name, ok, what, detail) for the GPU check's verdicts: both trainers ran alone and
    together, and NVML told their utilization."""
    ran = all(r["rate"] > 0 for r in m["alone"] + m["together"])
    told = all(util_alone(m, i) > 0 for i in range(len(m["alone"])))
    return ("colocation", ran and told, "co-location: two trainers ran alone and together, NVML told their utilization",
            f"alone {[round(r['rate'], 2) for r in m['alone']]} it/s, together {[round(r['rate'], 2) for r in m['together']]} it/s")
