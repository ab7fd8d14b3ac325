"""The co-location part of gpuq's GPU check: two train_torch.py trainers on one card,
each alone, then both together. It prints their step rates and NVML's utilizations
beside what gpuq's sharing model predicts (README, "Simulated trainers"):

    each of k trainers on a card runs at min(1, 1/sum(u)) * (1 - c)**(k - 1) of its speed
    alone, u being the share of the card each keeps busy alone (GPU-Util)

so that the first run on a real card calibrates the model: u as NVML measures it, c as
the speeds show it. Rates and utilizations are taken over the time every trainer of a
run was stepping, told by their progress lines: not over their start (importing
PyTorch, building the model: seconds of an idle card), nor, together, over the time one
ran on alone after the other ended. Standard library only; nvidia-smi and PyTorch are
only needed by measure()."""

import json
import os
import re
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_TORCH = os.path.join(HERE, "..", "trainers", "train_torch.py")
COSTS = (0.0, 0.05)


def predicted_speed(utils, cost):
    """The model's speed of each of the trainers sharing a card, as a share of its speed
    alone, from their utilizations alone (0 to 1)."""
    total = sum(utils)
    return min(1.0, 1.0 / total if total > 0 else 1.0) * (1 - cost) ** (len(utils) - 1)


def predicted_sliced(utils):
    """A model of time slicing, each trainer's speed as a share of its speed alone:
    min(1/Σu, 1/(1 + Σ over the others of min(its u, theirs))). The card runs one
    process's kernels at a time, so a trainer waits for its neighbours' about as long as
    they keep the card busy, but no longer than it would itself. Fitted to the pairs an
    H200 ran without MPS (README, "On a real machine"); not yet gpuq's own model."""
    total = sum(utils)
    out = []
    for i, u in enumerate(utils):
        waits = sum(min(u, v) for j, v in enumerate(utils) if j != i)
        out.append(min(1.0, 1.0 / total if total > 0 else 1.0, 1.0 / (1 + waits)))
    return out


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
    background, each sample with its time, and gives their means over a window."""

    def __init__(self, card, query_card, query_procs, every=0.5, clock=time.monotonic):
        super().__init__(lambda: self.add(query_card(card), query_procs(card)), every)
        self.clock = clock
        self.card_samples, self.proc_samples = [], {}

    def add(self, card_util, procs):
        t = self.clock()
        if card_util is not None:
            self.card_samples.append((t, card_util))
        for pid, sm in procs.items():
            self.proc_samples.setdefault(pid, []).append((t, sm))

    def card_mean(self, since=float("-inf"), until=float("inf")):
        return mean_between(self.card_samples, since, until)

    def proc_mean(self, pid, since=float("-inf"), until=float("inf")):
        return mean_between(self.proc_samples.get(pid, []), since, until)


def mean_between(samples, since, until):
    """The mean of the (time, value) samples taken from since to until, or None."""
    inside = [v for t, v in samples if since <= t <= until]
    return sum(inside) / len(inside) if inside else None


# train_torch.py's progress line: "train:  40%|████      | 40/100 [00:05<00:07, ...".
PROGRESS = re.compile(r"\| (\d+)/\d+ \[")


class Progress:
    """Reads a trainer's output in the background and keeps, for each progress line,
    the time it came and the step it told: [(time, step)]."""

    def __init__(self, stream, clock=time.monotonic):
        self.points = []
        self._thread = threading.Thread(target=self._read, args=(stream, clock), daemon=True)

    def start(self):
        self._thread.start()

    def join(self):
        self._thread.join()

    def _read(self, stream, clock):
        for line in stream:
            m = PROGRESS.search(line)
            if m:
                self.points.append((clock(), int(m.group(1))))


def stepping(progresses):
    """The window in which every trainer was stepping: from the last one's first
    progress line to the first one's last; None where a trainer told none."""
    if not all(p.points for p in progresses):
        return None
    return max(p.points[0][0] for p in progresses), min(p.points[-1][0] for p in progresses)


def rate_between(points, since, until):
    """Steps a second from the first to the last progress line in [since, until], or
    None where fewer than two lines fall in it."""
    inside = [(t, s) for t, s in points if since <= t <= until]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, s0), (t1, s1) = inside[0], inside[-1]
    return (s1 - s0) / (t1 - t0)


def nvidia_smi_card(card):
    r = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", str(card)],
                       capture_output=True, text=True)
    return parse_card_util(r.stdout) if r.returncode == 0 else None


def nvidia_smi_pmon(card):
    r = subprocess.run(["nvidia-smi", "pmon", "-c", "1", "-s", "u", "-i", str(card)], capture_output=True, text=True)
    return parse_pmon(r.stdout) if r.returncode == 0 else {}


def run_together(python, card, work, configs, sampler=None, env=None):
    """Runs a train_torch.py of each config on one card at once, with env (a dict) added
    to their environment; returns, for each, its steps a second and NVML's mean
    utilization of its process (None where pmon gave none) while all were stepping, and
    the card's mean utilization then."""
    sampler = sampler or UtilSampler(card, nvidia_smi_card, nvidia_smi_pmon)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(card), CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1", **(env or {}))
    procs = []
    for cfg in configs:
        d = tempfile.mkdtemp(dir=work)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        p = subprocess.Popen([python, TRAIN_TORCH, "--config", os.path.join(d, "config.json")], env=env,
                             stdout=subprocess.PIPE, text=True, errors="replace")
        progress = Progress(p.stdout, sampler.clock)
        progress.start()
        procs.append((d, p, progress))
    sampler.start()
    try:
        for _, p, progress in procs:
            p.wait()
            progress.join()
    finally:
        sampler.stop()
    for d, p, _ in procs:
        if p.returncode != 0:
            raise RuntimeError(f"train_torch.py exited with status {p.returncode} ({d})")
    window = stepping([progress for _, _, progress in procs])
    if window is None:
        raise RuntimeError(f"a trainer printed no progress line ({', '.join(d for d, _, _ in procs)})")
    out = []
    for d, p, progress in procs:
        rate = rate_between(progress.points, *window)
        if rate is None:
            raise RuntimeError(f"too few progress lines while every trainer was stepping ({d}): give them more steps")
        out.append({"rate": rate, "util": sampler.proc_mean(p.pid, *window)})
    return out, sampler.card_mean(*window)


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


MPS_CONTROL = "nvidia-cuda-mps-control"


class MPS:
    """NVIDIA's Multi-Process Service, started for a run's trainers and stopped after
    it, with pipe and log directories of its own under work, as gpuq run starts it for
    sharing: mps. run is subprocess.run, or a stand-in for tests."""

    def __init__(self, work, run=subprocess.run):
        d = tempfile.mkdtemp(prefix="mps-", dir=work)
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(d, "pipe"), "CUDA_MPS_LOG_DIRECTORY": os.path.join(d, "log")}
        self.run = run

    def command(self, *args, stdin=None):
        return self.run([MPS_CONTROL, *args], input=stdin, capture_output=True, text=True, env=dict(os.environ, **self.env))

    def start(self):
        """Starts the daemon; RuntimeError where it cannot be (no program, or it failed)."""
        for d in self.env.values():
            os.makedirs(d, mode=0o700, exist_ok=True)
        try:
            r = self.command("-d")
        except OSError as e:
            raise RuntimeError(f"{MPS_CONTROL}: {e}") from e
        if r.returncode != 0:
            raise RuntimeError(f"{MPS_CONTROL} -d exited with status {r.returncode}: {(r.stdout + r.stderr).strip()}")

    def stop(self):
        self.command(stdin="quit\n")


def measure_mps(python, card, work, configs, mps=None):
    """All configs together on one card under MPS: {"together": [...], "card_together": x};
    RuntimeError where MPS could not be started."""
    mps = mps or MPS(work)
    mps.start()
    try:
        together, card_together = run_together(python, card, work, configs, env=mps.env)
    finally:
        mps.stop()
    return {"together": together, "card_together": card_together}


def report_mps(m, mps, names=("a", "b")):
    """The speeds of the trainers together under MPS (mps, from measure_mps), as shares of
    their speeds alone (m, from measure), beside processor sharing's (which MPS, running
    several processes' kernels at once, is expected to follow) and time slicing's, both
    from the cards' figures, and each model's error."""
    cards = [card_alone(m, i) for i in range(len(names))]
    sliced = predicted_sliced(cards)
    lines = ["", "co-location under MPS: the same trainers together, through NVIDIA's Multi-Process Service",
             f"{'TRAINER':8} {'TOGETHER it/s':>13} {'SPEED':>6} {'SHARING c=0':>11} {'SLICED':>7}"]
    err_ps, err_sliced = [], []
    for i, name in enumerate(names):
        alone, together = m["alone"][i]["rate"], mps["together"][i]["rate"]
        speed = together / alone if alone > 0 else 0
        ps = predicted_speed(cards, 0)
        err_ps.append(abs(ps - speed))
        err_sliced.append(abs(sliced[i] - speed))
        lines.append(f"{name:8} {together:>13.2f} {speed:>6.2f} {ps:>11.2f} {sliced[i]:>7.2f}")
    lines.append(f"card utilization together: {percent(mps['card_together'])}; "
                 f"error of processor sharing: {sum(err_ps) / len(err_ps):.3f}; of time slicing: {sum(err_sliced) / len(err_sliced):.3f}")
    return "\n".join(lines)


def util_alone(m, i):
    """Trainer i's utilization alone (0 to 1): its process's, else the card's while it
    ran alone."""
    u = m["alone"][i]["util"]
    if u is None:
        u = m["card_alone"][i]
    return (u or 0) / 100


def card_alone(m, i):
    """Trainer i's utilization alone (0 to 1) as the card told it while it ran alone,
    else its process's: the card's figure counts every moment a kernel ran, which a
    process's reading (pmon) has been seen to miss."""
    u = m["card_alone"][i]
    return util_alone(m, i) if u is None else u / 100


def percent(u):
    """A utilization NVML told (0 to 100) as a percentage; "-" where it told none."""
    return "-" if u is None else f"{u:.0f}%"


def report(m, names=("a", "b")):
    """The step rates and utilizations beside the model's speeds, and the model's error:
    UTIL is what the model reads of each trainer alone (its process's, else the card's),
    CARD the card's while it ran alone, beside it to tell a process's reading that is
    off (pmon samples a process's share of the card). BY CARD is the model's speed,
    with the larger cost, from the cards' figures instead (card_alone); SLICED the time
    slicing model's (predicted_sliced), from the cards' figures too."""
    utils = [util_alone(m, i) for i in range(len(names))]
    cards = [card_alone(m, i) for i in range(len(names))]
    lines = ["", "co-location: two train_torch.py trainers on one card, each alone, then together",
             f"{'TRAINER':8} {'ALONE it/s':>10} {'UTIL':>5} {'CARD':>5} {'TOGETHER it/s':>13} {'SPEED':>6} "
             + " ".join(f"{'MODEL c=' + format(c, '.2f'):>12}" for c in COSTS) + f" {'BY CARD':>8} {'SLICED':>7}"]
    errors = {c: [] for c in COSTS}
    by_card, by_slicing = [], []
    sliced = predicted_sliced(cards)
    for i, name in enumerate(names):
        alone, together = m["alone"][i]["rate"], m["together"][i]["rate"]
        speed = together / alone if alone > 0 else 0
        preds = [predicted_speed(utils, c) for c in COSTS]
        for c, p in zip(COSTS, preds):
            errors[c].append(abs(p - speed))
        card_pred = predicted_speed(cards, COSTS[-1])
        by_card.append(abs(card_pred - speed))
        by_slicing.append(abs(sliced[i] - speed))
        lines.append(f"{name:8} {alone:>10.2f} {100 * utils[i]:>4.0f}% {percent(m['card_alone'][i]):>5} {together:>13.2f} {speed:>6.2f} "
                     + " ".join(f"{p:>12.2f}" for p in preds) + f" {card_pred:>8.2f} {sliced[i]:>7.2f}")
    lines.append(f"card utilization together: {percent(m['card_together'])}; "
                 + "; ".join(f"model error (c={c:.2f}): {sum(e) / len(e):.3f}" for c, e in errors.items())
                 + f"; by the cards' figures (c={COSTS[-1]:.2f}): {sum(by_card) / len(by_card):.3f}"
                 + f"; time slicing (SLICED), by the cards' figures: {sum(by_slicing) / len(by_slicing):.3f}")
    return "\n".join(lines)


def judge(m):
    """(name, ok, what, detail) for the GPU check's verdicts: both trainers ran alone and
    together, and NVML told their utilization."""
    ran = all(r["rate"] > 0 for r in m["alone"] + m["together"])
    told = all(util_alone(m, i) > 0 for i in range(len(m["alone"])))
    return ("colocation", ran and told, "co-location: two trainers ran alone and together, NVML told their utilization",
            f"alone {[round(r['rate'], 2) for r in m['alone']]} it/s, together {[round(r['rate'], 2) for r in m['together']]} it/s")
