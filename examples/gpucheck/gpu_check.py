#!/usr/bin/env python3
"""gpuq's check on a real NVIDIA machine: `make gpu-check`, or

    python3 examples/gpucheck/gpu_check.py --gpuq bin/gpuq

It needs an NVIDIA GPU and a Python with PyTorch (the one running this script), and
checks, on the machine's own cards, what simulated ones cannot show:

  1. `gpuq gpus` lists the real cards;
  2. a sweep of train_torch.py jobs whose declared estimate is far too low, so that
     several run out of memory on every card with PyTorch's own CUDA OOM; gpuq must
     recognise each OOM and bring every job to success;
  3. a job under torchrun (gpus_per_job: 1): its worker runs in a session of its own, and
     gpuq must still count its memory as the job's;
  4. a trainer that catches an OOM, goes on, then dies of a KeyError: a failure, not an
     OOM;
  5. two train_torch.py trainers on one card, each alone, then together: their step
     rates and NVML's utilizations beside what gpuq's sharing model predicts, so that
     the first run on a real card calibrates the model (colocation.py);
  6. one trainer alone on a card under gpuq for a minute and a half: the utilization gpuq
     measured of it must be the card's (nvidia-smi's GPU-Util, what the sharing model
     counts), within 0.15;
  7. where the machine has NVIDIA MPS, two jobs of a sweep with sharing: mps on one card:
     gpuq must start MPS's control daemon and both must succeed. The pair of 5. runs
     together under MPS too, beside the models, to tell which one MPS follows.

It samples NVML itself (nvidia-smi, four times a second) and prints, for each attempt,
NVML's peak beside gpuq's peak_bytes, the OOM texts, the attempts of each job, and PASS
or FAIL for each expectation. It exits 0 when all pass, 1 otherwise, and 0 with "no GPU
here" on a machine without an NVIDIA GPU or without PyTorch.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import colocation  # noqa: E402
TRAIN_TORCH = os.path.join(HERE, "..", "trainers", "train_torch.py")
CATCH_OOM = os.path.join(HERE, "catch_oom.py")
GiB = 1 << 30
MiB = 1 << 20

# Each OOM-sweep job is sized to peak at this share of the smallest card, as NVML sees
# it: two fit on a card, the third does not.
TARGET_SHARE = 0.42
# Jobs per card the OOM sweep's plan allows, with an estimate that lets them all start.
JOBS_PER_CARD = 4
# Seconds each OOM-sweep job should train, so that gpuq's one-second poll sees its peak.
TRAIN_SECONDS = 40
# gpuq samples once a second, this check four times: gpuq may miss the top of a spike.
PEAK_LOW, PEAK_HIGH = 0.80, 1.05

MODEL = {"n_layers": 4, "d_model": 512, "n_heads": 8, "vocab_size": 32000, "max_length": 1024,
         "precision": "bf16", "gradient_accumulation_steps": 1, "gradient_checkpointing": False,
         "num_data_workers": 0, "logits_to_keep": 0, "dataset_size": 4096, "eval_batches": 1}


def no_gpu_reason(python):
    """Why there is nothing to check here, or None when there is an NVIDIA GPU that
    PyTorch can use."""
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi"
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if r.returncode != 0 or "GPU " not in r.stdout:
        return "nvidia-smi lists no GPU"
    r = subprocess.run([python, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"],
                       capture_output=True, text=True)
    if r.returncode == 3:
        return "PyTorch sees no CUDA device"
    if r.returncode != 0:
        return f"{python} has no PyTorch"
    return None


# --- NVML, through nvidia-smi -------------------------------------------------------

def parse_cards(csv_text):
    """`nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader,nounits`:
    [(index, uuid, total bytes)]."""
    cards = []
    for line in csv_text.strip().splitlines():
        index, uuid, total = (f.strip() for f in line.split(","))
        cards.append((int(index), uuid, int(total) * MiB))
    return cards


def parse_compute_apps(csv_text):
    """`nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`:
    [(uuid, pid, bytes or None)]; NVML's "[N/A]" (MIG, some containers) is None."""
    apps = []
    for line in csv_text.strip().splitlines():
        if not line.strip() or "No running" in line:
            continue
        uuid, pid, used = (f.strip() for f in line.split(","))
        apps.append((uuid, int(pid), int(used) * MiB if used.isdigit() else None))
    return apps


def attempt_of(pid, proc="/proc"):
    """The gpuq attempt ("<job>/<n>") a process belongs to, from the GPUQ_JOB_ID and
    GPUQ_ATTEMPT it inherited; "" for a process of none, None when this PID namespace
    has no such process (gpuq's check runs in a container that NVML does not see)."""
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    job, n = env.get(b"GPUQ_JOB_ID"), env.get(b"GPUQ_ATTEMPT")
    return f"{job.decode()}/{n.decode()}" if job and n else ""


class Sampler(colocation.Poller):
    """Samples NVML's compute processes in the background and keeps, per attempt, the
    most its processes held on one card."""

    def __init__(self, query, proc="/proc", every=0.25):
        super().__init__(lambda: self.add(query()), every)
        self.proc = proc
        self.peaks, self.hidden, self.unknown = {}, set(), set()

    def pids_hidden(self):
        """The PIDs NVML listed that this PID namespace does not have, when it is a
        namespace of its own: none of NVML's PIDs was ever found to be an attempt's.
        Where some were, a missing one is a process that ended between NVML's listing and
        the look in /proc (an attempt that ran out of memory, say), not a hidden one."""
        return set() if self.peaks or self.unknown else set(self.hidden)

    def add(self, apps):
        sums = {}
        for uuid, pid, used in apps:
            attempt = attempt_of(pid, self.proc)
            if attempt is None:
                self.hidden.add(pid)
                continue
            if not attempt:
                continue
            if used is None:
                self.unknown.add(attempt)
                continue
            sums[(attempt, uuid)] = sums.get((attempt, uuid), 0) + used
        for (attempt, _), used in sums.items():
            self.peaks[attempt] = max(self.peaks.get(attempt, 0), used)


def nvidia_smi_apps():
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return parse_compute_apps(r.stdout) if r.returncode == 0 else []


# --- sizing the OOM sweep to the card -----------------------------------------------

def plan_batch(total, small, large):
    """The micro-batch at which a job peaks near TARGET_SHARE of a card of `total`
    bytes, from two measured runs (batch, PyTorch's peak allocated bytes): what does
    not grow with the batch, plus what each sample adds. NVML sees more than PyTorch
    allocates (the CUDA context, the cache): 600 MiB is kept for it."""
    (b1, p1), (b2, p2) = small, large
    per_sample = max((p2 - p1) / (b2 - b1), 1)
    base = p1 - b1 * per_sample
    return max(1, int((TARGET_SHARE * total - 600 * MiB - base) / per_sample))


def measure(python, card, batch, work):
    """Runs train_torch.py for a few steps on one card: (peak allocated bytes, seconds a
    step). A step's time is taken from its progress lines from the second on (the first
    steps warm up), not from the run's whole time, which counts the warm-up and the
    evaluation after the steps and read 14 times a step's time on an H200."""
    d = tempfile.mkdtemp(dir=work)
    cfg = dict(MODEL, batch_size=batch, steps=8)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(card), CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1")
    p = subprocess.Popen([python, TRAIN_TORCH, "--config", os.path.join(d, "config.json")], env=env,
                         stdout=subprocess.PIPE, text=True, errors="replace")
    progress = colocation.Progress(p.stdout)
    progress.start()
    p.wait()
    progress.join()
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, p.args)
    with open(os.path.join(d, "metrics.json")) as f:
        m = json.load(f)
    return m["peak_gpu_memory_bytes"], step_seconds(progress.points, m["seconds"] / m["steps"])


def step_seconds(points, otherwise):
    """Seconds a step from progress points [(time, step)], from the second on (the
    first two steps warm up); otherwise where they tell too little."""
    rate = colocation.rate_between(points[1:], float("-inf"), float("inf"))
    return 1 / rate if rate else otherwise


# --- the sweeps ---------------------------------------------------------------------

def oom_sweep(python, cards, batch, steps):
    params = dict(MODEL, batch_size=batch, steps=steps)
    return {"name": "gpucheck-oom", "command": [python, TRAIN_TORCH, "--config", "{config}"],
            "config": {"format": "json"}, "params": params,
            "matrix": {"seed": list(range(1, JOBS_PER_CARD * len(cards) + 1))},
            # Far too low on purpose: JOBS_PER_CARD start on each card and crowd each
            # other out of memory.
            "memory": "256MiB", "gpu_plan": str(JOBS_PER_CARD), "oom": {"max_attempts": 6}}


def torchrun_sweep(python, batch, steps):
    params = dict(MODEL, batch_size=max(1, batch // 2), steps=steps)
    return {"name": "gpucheck-torchrun",
            "command": [python, "-m", "torch.distributed.run", "--nproc_per_node", "1", TRAIN_TORCH, "--config", "{config}"],
            "config": {"format": "json"}, "params": params, "jobs": [{}], "gpus_per_job": 1, "memory": "1GiB"}


def caught_sweep(python):
    return {"name": "gpucheck-caught", "command": [python, CATCH_OOM], "jobs": [{}], "memory": "1GiB"}


def run_sweep(gpuq, sweep, work, env):
    """Runs a sweep to its end with `gpuq run --json`: (exit status, summary or None)."""
    path = os.path.join(work, sweep["name"] + ".json")
    with open(path, "w") as f:
        json.dump(sweep, f, indent=2)
    r = subprocess.run([gpuq, "run", path, "--json", "--log-dir", os.path.join(work, "logs", sweep["name"])],
                       capture_output=True, text=True, env=env)
    sys.stderr.write(r.stderr)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, None


# --- judging ------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
OOM_LINE = re.compile(r"out of memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED", re.I)


def oom_text(log):
    """The last line of a log that tells of an out-of-memory error, shortened."""
    lines = [l.strip() for l in ANSI.sub("", log).splitlines() if OOM_LINE.search(l)]
    return lines[-1][:220] if lines else ""


def attempts(summary):
    """(job id, attempt) for every attempt of a `gpuq run --json` summary."""
    for job in (summary or {}).get("jobs", []):
        for a in job["attempts"]:
            yield job, a


def key(job, a):
    return f"{job['id']}/{a['n']}"


def judge(gpus, runs, nvml_peaks, hidden, n_cards):
    """PASS or FAIL for each expectation: [(name, ok, what, detail)]. gpus is `gpuq gpus`'s
    (exit status, stdout, stderr); runs maps each sweep's name to its (exit status,
    summary); nvml_peaks maps attempts to NVML's peak; hidden is the PIDs NVML listed that
    this PID namespace does not have."""
    out = []
    code, stdout, stderr = gpus
    rows = [l for l in stdout.splitlines()[1:] if l.strip()]
    out.append(("gpus", code == 0 and "SIMULATED" not in stderr and len(rows) >= 1,
                "gpuq gpus lists the real cards", f"exit {code}, {len(rows)} cards"))

    code, oom = runs.get("gpucheck-oom", (None, None))
    jobs = (oom or {}).get("jobs", [])
    done = sum(j["state"] == "succeeded" for j in jobs)
    out.append(("oom-succeeded", code == 0 and bool(jobs) and done == len(jobs), "OOM sweep: every job succeeded in the end",
                f"exit {code}, {done} of {len(jobs)} succeeded"))
    per_card = {}
    for job, a in attempts(oom):
        if a["outcome"] == "gpu-oom":
            per_card[a["gpu"]] = per_card.get(a["gpu"], 0) + 1
    out.append(("oom-every-card", len(per_card) == n_cards and min(per_card.values(), default=0) >= 2,
                "OOM sweep: real CUDA OOMs, at least two on every card", f"OOMs by card: {per_card}"))
    unrecognised = [key(j, a) for j, a in attempts(oom)
                    if a["outcome"] not in ("success", "gpu-oom") or a["outcome"] == "gpu-oom" and not (a.get("oom") or {}).get("signature")]
    out.append(("oom-recognised", bool(jobs) and not unrecognised, "OOM sweep: every attempt a success or a recognised OOM",
                "unrecognised: " + (", ".join(unrecognised) or "none")))

    mismatched = []
    for name in ("gpucheck-oom", "gpucheck-torchrun"):
        for job, a in attempts(runs.get(name, (None, None))[1]):
            if a["outcome"] != "success":
                continue
            nvml, ours = nvml_peaks.get(key(job, a)), a["peak_bytes"]
            if hidden:  # gpuq cannot see the PIDs either: its peak must say unknown
                if not a.get("peak_unknown"):
                    mismatched.append(f"{key(job, a)} has a peak, though NVML's PIDs are not in this namespace")
            elif a.get("peak_unknown") or not nvml or not PEAK_LOW * nvml <= ours <= PEAK_HIGH * nvml:
                mismatched.append(f"{key(job, a)} gpuq {ours / GiB:.2f} GiB{' (unknown)' if a.get('peak_unknown') else ''}, NVML {(nvml or 0) / GiB:.2f} GiB")
    out.append(("peaks", not mismatched, f"peaks: gpuq's within {PEAK_LOW:.0%}-{PEAK_HIGH:.0%} of NVML's"
                + (" (PIDs hidden: unknown)" if hidden else ""), "; ".join(mismatched) or "all"))

    code, tr = runs.get("gpucheck-torchrun", (None, None))
    last = [a for _, a in attempts(tr)][-1:] or [{}]
    ok = code == 0 and last[0].get("outcome") == "success" and (last[0].get("peak_bytes", 0) > 0 or hidden)
    out.append(("torchrun", ok, "torchrun job (a worker in its own session): succeeded, its memory counted as the job's",
                f"exit {code}, peak {last[0].get('peak_bytes', 0) / GiB:.2f} GiB"))

    code, caught = runs.get("gpucheck-caught", (None, None))
    tried = [a["outcome"] for _, a in attempts(caught)]
    out.append(("caught", code == 1 and tried == ["failed"], "a trainer that caught an OOM, then died of a KeyError: failed, not an OOM",
                f"exit {code}, attempts {tried}"))
    return out


def report(runs, nvml_peaks, logs, checks):
    """The attempts with both peaks, the OOM texts, attempts per job, then the verdicts."""
    lines = ["", f"{'ATTEMPT':28} {'GPU':>3} {'TIER':>4} {'OUTCOME':18} {'GPUQ PEAK':>10} {'NVML PEAK':>10}"]
    texts = []
    for name, (_, summary) in runs.items():
        for job, a in attempts(summary):
            k = key(job, a)
            nvml = nvml_peaks.get(k)
            peak = "unknown" if a.get("peak_unknown") else f"{a['peak_bytes'] / GiB:.2f} GiB"
            lines.append(f"{k:28} {a['gpu']:>3} {a['tier']:>4} {a['outcome']:18} {peak:>10} "
                         + (f"{nvml / GiB:>6.2f} GiB" if nvml else f"{'-':>10}"))
            if a["outcome"] == "gpu-oom" or name == "gpucheck-caught":
                texts.append(f"{k}: {oom_text(logs.get(k, '')) or '(no OOM text in the log)'}")
    lines += ["", "OOM texts:"] + ["  " + t for t in texts]
    lines += ["", "attempts per job:"]
    for name, (_, summary) in runs.items():
        for job in (summary or {}).get("jobs", []):
            lines.append(f"  {job['id']:26} {job['state']:10} {' '.join(a['outcome'] for a in job['attempts'])}")
    lines.append("")
    for _, ok, what, detail in checks:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {what} ({detail})")
    return "\n".join(lines)


def read_logs(runs):
    logs = {}
    for _, summary in runs.values():
        for job, a in attempts(summary):
            try:
                with open(a["log"], errors="replace") as f:
                    logs[key(job, a)] = f.read()
            except OSError:
                pass
    return logs


# A step's seconds by (card, batch), as measured: the co-location check and the learned
# utilization check run the same batch, and each measuring run costs seconds of the card.
_step_seconds = {}


def steps_for(seconds, python, card, batch, work, measure=measure):
    """Steps of train_torch.py at batch that take about seconds on card, as a short run
    there measures them (once for a card and batch)."""
    if (card, batch) not in _step_seconds:
        _, _step_seconds[card, batch] = measure(python, card, batch, work)
    return max(20, min(200000, int(seconds / max(_step_seconds[card, batch], 1e-4))))


def colocation_check(python, card, work, batch):
    """Two trainers (a quarter and half the OOM sweep's batch) on one card, alone then
    together, each alone for about 15 seconds; prints the step rates and utilizations
    beside the model's speeds, and returns the verdict."""
    configs = [dict(MODEL, batch_size=b, steps=steps_for(15, python, card, b, work), seed=i + 1)
               for i, b in enumerate((max(1, batch // 4), max(1, batch // 2)))]
    print(f"gpu-check: co-location on card {card}: batch {configs[0]['batch_size']} and {configs[1]['batch_size']}", flush=True)
    try:
        m = colocation.measure(python, card, work, configs)
    except (RuntimeError, OSError, ValueError) as e:
        return ("colocation", False, "co-location: two trainers ran alone and together", str(e))
    print(colocation.report(m))
    try:
        print(colocation.report_mps(m, colocation.measure_mps(python, card, work, configs)))
    except (RuntimeError, OSError, ValueError) as e:
        print(f"co-location under MPS: not measured ({e})")
    return colocation.judge(m)


def mps_sweep(python, card, batch, steps):
    params = dict(MODEL, batch_size=batch, steps=steps)
    return {"name": "gpucheck-mps", "command": [python, TRAIN_TORCH, "--config", "{config}"],
            "config": {"format": "json"}, "params": params, "matrix": {"seed": [1, 2]},
            "memory": "1GiB", "gpus": str(card), "gpu_plan": "2", "sharing": "mps"}


def judge_mps(name, rc, summary, server_log):
    """(name, ok, what, detail) for the sweep run with sharing: mps: both jobs succeeded,
    and an MPS server ran: the control daemon gpuq started launches one only when a
    client connects, and the server writes server.log (server_log: its text, None where
    there is none). The control daemon's own log is written whether or not any did."""
    what = "sharing: mps: gpuq started NVIDIA MPS and both jobs ran through it"
    states = [job.get("state") for job in (summary or {}).get("jobs", [])]
    ok = rc == 0 and states == ["succeeded", "succeeded"] and bool(server_log)
    detail = f"exit {rc}, jobs {states}, " + ("an MPS server ran (server.log)" if server_log else "no MPS server ran (no server.log)")
    return (name, ok, what, detail)


def mps_check(gpuq, python, card, work, env, batch):
    """Two train_torch.py jobs sharing a card through MPS under gpuq run (sharing: mps);
    None where the machine has no MPS control program, nothing to check."""
    if shutil.which(colocation.MPS_CONTROL) is None:
        print(f"gpu-check: no {colocation.MPS_CONTROL} here: sharing: mps not checked")
        return None
    sweep = mps_sweep(python, card, batch, steps_for(20, python, card, batch, work))
    print(f"gpu-check: gpuq run {sweep['name']}", flush=True)
    rc, summary = run_sweep(gpuq, sweep, work, env)
    try:
        with open(os.path.join(work, "logs", sweep["name"], "mps-log", "server.log")) as f:
            server_log = f.read()
    except OSError:
        server_log = None
    return judge_mps("mps", rc, summary, server_log)


# How long the trainer of the learned-utilization check runs: past the minute gpuq
# waits before it samples an attempt's utilization (scheduler.UtilAfter), and half a
# minute more for its samples.
UTIL_SECONDS = 95
# How far gpuq's measured utilization may be from the card's, as nvidia-smi sampled it.
UTIL_TOLERANCE = 0.15


def util_sweep(python, card, batch, steps):
    params = dict(MODEL, batch_size=batch, steps=steps)
    return {"name": "gpucheck-util", "command": [python, TRAIN_TORCH, "--config", "{config}"],
            "config": {"format": "json"}, "params": params, "jobs": [{}], "memory": "1GiB", "gpus": str(card)}


# How far apart the card's and the process's figures must be for the check to tell
# which one gpuq learned from.
UTIL_APART = 0.05


def judge_util(summary, card_util, proc_util):
    """(name, ok, what, detail): the trainer succeeded, and gpuq measured its utilization
    near what the card was busy (nvidia-smi's GPU-Util, the sharing model's figure)
    while it ran alone, and nearer it than to its process's figure where the two are
    UTIL_APART or more apart; card_util and proc_util (pmon's SM figure) are percent,
    None where not sampled."""
    what = "learned utilization: gpuq's figure of a trainer alone is the card's"
    runs = list(attempts(summary))
    if len(runs) != 1 or runs[0][1].get("util") is None or card_util is None:
        return ("util", False, what, f"gpuq measured {[a.get('util') for _, a in runs]}, the card {card_util}")
    job, a = runs[0]
    got, card = a["util"], card_util / 100
    proc = None if proc_util is None else proc_util / 100
    detail = (f"gpuq {got:.2f}, the card {card:.2f}, the process (pmon) " + ("-" if proc is None else f"{proc:.2f}")
              + f"; within {UTIL_TOLERANCE}")
    apart = proc is not None and abs(card - proc) >= UTIL_APART
    if not apart:
        detail += "; the card's and the process's figures too close to tell which gpuq took"
    ok = (job.get("state") == "succeeded" and a.get("outcome") == "success" and abs(got - card) <= UTIL_TOLERANCE
          and (not apart or abs(got - card) < abs(got - proc)))
    if job.get("state") != "succeeded":
        detail += f"; the job {job.get('state')}"
    return ("util", ok, what, detail)


def learned_util_check(gpuq, python, card, work, env, batch):
    """One train_torch.py trainer under gpuq, alone on a card for UTIL_SECONDS: what
    gpuq measured of its utilization beside what nvidia-smi sampled of the card and of
    the process after its first UTIL_SECONDS/2 (its start-up left out)."""
    sweep = util_sweep(python, card, batch, steps_for(UTIL_SECONDS, python, card, batch, work))
    print(f"gpu-check: gpuq run {sweep['name']} (batch {batch}, {sweep['params']['steps']} steps, about {UTIL_SECONDS} s)", flush=True)
    sampler = colocation.UtilSampler(card, colocation.nvidia_smi_card, colocation.nvidia_smi_pmon)
    began = sampler.clock()
    sampler.start()
    try:
        _, summary = run_sweep(gpuq, sweep, work, env)
    finally:
        sampler.stop()
    since = began + UTIL_SECONDS / 2
    procs = [m for m in (sampler.proc_mean(pid, since) for pid in sampler.proc_samples) if m is not None]
    return judge_util(summary, sampler.card_mean(since), max(procs) if procs else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuq", default="bin/gpuq", help="the gpuq binary to check")
    args = ap.parse_args(argv)
    python = sys.executable
    reason = no_gpu_reason(python)
    if reason:
        print(f"gpu-check: no GPU here ({reason}); nothing to check")
        return 0
    gpuq = os.path.abspath(args.gpuq)
    work = tempfile.mkdtemp(prefix="gpuq-gpu-check-")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(work, "state"), GPUQ_SIM_LEDGER=os.path.join(work, "sim"))
    for k in ("GPUQ_GPUS", "GPUQ_GPU_PLAN", "GPUQ_CONFIG"):
        env.pop(k, None)

    r = subprocess.run([gpuq, "gpus"], capture_output=True, text=True, env=env)
    print(r.stdout + r.stderr)
    gpus = (r.returncode, r.stdout, r.stderr)
    q = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True, check=True)
    cards = parse_cards(q.stdout)
    smallest = min(cards, key=lambda c: c[2])
    print(f"gpu-check: sizing jobs to card {smallest[0]} ({smallest[2] / GiB:.1f} GiB), "
          f"{JOBS_PER_CARD} per card, each near {TARGET_SHARE:.0%} of it")
    small, _ = measure(python, smallest[0], 1, work)
    large, per_step = measure(python, smallest[0], 4, work)
    batch = plan_batch(smallest[2], (1, small), (4, large))
    steps = max(30, min(3000, int(TRAIN_SECONDS / max(per_step * batch / 4, 1e-3))))
    print(f"gpu-check: batch {batch}, {steps} steps")

    sampler = Sampler(nvidia_smi_apps)
    sampler.start()
    runs = {}
    try:
        for sweep in (oom_sweep(python, cards, batch, steps), torchrun_sweep(python, batch, steps), caught_sweep(python)):
            print(f"gpu-check: gpuq run {sweep['name']}", flush=True)
            runs[sweep["name"]] = run_sweep(gpuq, sweep, work, env)
    finally:
        sampler.stop()
    checks = judge(gpus, runs, sampler.peaks, sampler.pids_hidden(), len(cards))
    print(report(runs, sampler.peaks, read_logs(runs), checks))
    checks.append(colocation_check(python, smallest[0], work, batch))
    checks.append(learned_util_check(gpuq, python, smallest[0], work, env, max(1, batch // 4)))
    told = 2
    mps = mps_check(gpuq, python, smallest[0], work, env, max(1, batch // 4))
    if mps is not None:
        checks.append(mps)
        told += 1
    for _, ok, what, detail in checks[-told:]:
        print(f"{'PASS' if ok else 'FAIL'}  {what} ({detail})")
    print(f"\ngpu-check: logs and state in {work}")
    return 0 if all(ok for _, ok, _, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
