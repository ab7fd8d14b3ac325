#!/usr/bin/env python3
"""A small but real PyTorch trainer to start from: a tiny causal transformer learning
to continue arithmetic progressions of tokens (synthetic, so nothing to download).

gpuq runs it as `python3 train_torch.py --config {config}` and writes the config per
attempt (JSON, or YAML when PyYAML is installed). Every key the default OOM ladder
changes is honoured, so a degraded rung really uses less memory and trains on the same
effective batch:

  batch_size                    micro-batch per forward pass
  gradient_accumulation_steps   micro-batches per optimizer step (effective batch =
                                batch_size x gradient_accumulation_steps)
  gradient_checkpointing        recompute each block's activations in the backward pass
  num_data_workers              DataLoader worker processes (0: load in this process)

and the model and data knobs: max_length, logits_to_keep (compute the logits and loss
only for the last N positions; 0 = all), n_layers, d_model, n_heads, vocab_size,
precision (bf16, fp16, fp32), steps, lr, seed, dataset_size, eval_batches. Other keys
(a sweep's task names, seeds of its own) are accepted and ignored.

Uses the GPU that CUDA_VISIBLE_DEVICES leaves visible, or the CPU when there is none.
A CUDA out-of-memory error is not caught: PyTorch's message and a non-zero exit are
what gpuq reads to requeue the job on the next rung. Works with PyTorch 1.13 and 2.x.
At the end it prints the final metrics and writes them to metrics.json beside the config.
"""

import argparse
import json
import math
import os
import random
import sys
import time

DEFAULTS = {
    "batch_size": 8,
    "gradient_accumulation_steps": 4,
    "gradient_checkpointing": False,
    "num_data_workers": 2,
    "max_length": 256,
    "logits_to_keep": 0,
    "n_layers": 4,
    "d_model": 256,
    "n_heads": 4,
    "vocab_size": 8192,
    "precision": "bf16",
    "steps": 100,
    "lr": 3e-4,
    "seed": 0,
    "dataset_size": 8192,
    "eval_batches": 4,
}
PRECISIONS = ("bf16", "fp16", "fp32")


class ConfigError(ValueError):
    pass


def load_config(path):
    """Reads gpuq's rendered config: JSON, or YAML when PyYAML is installed."""
    with open(path) as f:
        text = f.read()
    try:
        cfg = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{path} is not JSON and PyYAML is not installed: "
                              "write config: {format: json} in the sweep, or pip install pyyaml")
        cfg = yaml.safe_load(text)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys to values")
    return cfg


def settle(raw):
    """Returns the config with defaults filled in, or raises ConfigError naming every
    key that is wrong and what to write instead."""
    cfg = dict(DEFAULTS)
    cfg.update({k: v for k, v in raw.items() if k in DEFAULTS})
    errs = []
    for key, default in DEFAULTS.items():
        v = cfg[key]
        if isinstance(default, bool):
            if not isinstance(v, bool):
                errs.append(f"{key}: {v!r} is not true or false")
        elif isinstance(default, int):
            if isinstance(v, bool) or not isinstance(v, int):
                errs.append(f"{key}: {v!r} is not a whole number")
        elif isinstance(default, float):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                errs.append(f"{key}: {v!r} is not a number")
            else:
                cfg[key] = float(v)
    if errs:
        raise ConfigError("; ".join(errs))
    for key in ("batch_size", "gradient_accumulation_steps", "n_layers", "d_model", "n_heads",
                "vocab_size", "steps", "dataset_size", "eval_batches"):
        if cfg[key] < 1:
            errs.append(f"{key}: {cfg[key]} must be at least 1")
    if cfg["num_data_workers"] < 0:
        errs.append(f"num_data_workers: {cfg['num_data_workers']} must be 0 or more")
    if cfg["max_length"] < 2:
        errs.append(f"max_length: {cfg['max_length']} must be at least 2")
    if not 0 <= cfg["logits_to_keep"] <= cfg["max_length"]:
        errs.append(f"logits_to_keep: {cfg['logits_to_keep']} must be between 0 (all) and max_length ({cfg['max_length']})")
    if cfg["d_model"] % max(cfg["n_heads"], 1):
        errs.append(f"d_model: {cfg['d_model']} must be a multiple of n_heads ({cfg['n_heads']})")
    if cfg["precision"] not in PRECISIONS:
        errs.append(f"precision: {cfg['precision']!r} is not one of {', '.join(PRECISIONS)}")
    if cfg["lr"] <= 0:
        errs.append(f"lr: {cfg['lr']} must be positive")
    if cfg["dataset_size"] < cfg["batch_size"]:
        errs.append(f"dataset_size: {cfg['dataset_size']} is smaller than one batch ({cfg['batch_size']})")
    if errs:
        raise ConfigError("; ".join(errs))
    return cfg


def effective_batch(cfg):
    return cfg["batch_size"] * cfg["gradient_accumulation_steps"]


def describe(cfg):
    """One line that says what this attempt runs, for the log."""
    return (f"micro-batch {cfg['batch_size']} x accumulation {cfg['gradient_accumulation_steps']}"
            f" = effective batch {effective_batch(cfg)}; checkpointing {'on' if cfg['gradient_checkpointing'] else 'off'};"
            f" {cfg['num_data_workers']} data workers; {cfg['n_layers']} layers x {cfg['d_model']} ({cfg['n_heads']} heads),"
            f" vocabulary {cfg['vocab_size']}, length {cfg['max_length']}, logits for"
            f" {cfg['logits_to_keep'] or 'all'} positions, {cfg['precision']}")


def progression(seed, index, length, vocab):
    """Sample `index` of the synthetic data: an arithmetic progression of tokens modulo
    the vocabulary, the same for the same seed and index in any worker process."""
    rng = random.Random(seed * 1_000_003 + index)
    start, step = rng.randrange(vocab), rng.randrange(1, 8)
    return [(start + i * step) % vocab for i in range(length)]


def progress_line(step, total, elapsed, loss):
    """A tqdm-like progress line: train:  40%|████      | 40/100 [00:05<00:07, 8.00it/s, loss=3.2100]"""
    frac = step / total
    filled = int(frac * 10)
    rate = step / elapsed if elapsed > 0 else 0.0
    left = (total - step) / rate if rate > 0 else 0.0
    return (f"train: {frac * 100:3.0f}%|{'█' * filled}{' ' * (10 - filled)}| {step}/{total}"
            f" [{clock(elapsed)}<{clock(left)}, {rate:.2f}it/s, loss={loss:.4f}]")


def clock(seconds):
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


class Progressions:
    """The training or evaluation set, as a torch Dataset (torch is imported only when
    a sample is made, so that the config code runs without it)."""

    def __init__(self, seed, size, length, vocab, offset=0):
        self.seed, self.size, self.length, self.vocab, self.offset = seed, size, length, vocab, offset

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        import torch
        return torch.tensor(progression(self.seed, self.offset + i, self.length + 1, self.vocab))


def build_model(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                       for z in self.qkv(self.ln1(x)).split(c, dim=2))
            if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
                y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class CausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.tok = nn.Embedding(cfg["vocab_size"], d)
            self.pos = nn.Embedding(cfg["max_length"], d)
            self.blocks = nn.ModuleList(Block(d, cfg["n_heads"]) for _ in range(cfg["n_layers"]))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg["vocab_size"], bias=False)

        def forward(self, idx, targets):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            for block in self.blocks:
                if cfg["gradient_checkpointing"] and self.training:
                    h = checkpoint(block, h, use_reentrant=False)
                else:
                    h = block(h)
            keep = cfg["logits_to_keep"] or t
            # Logits are batch x positions x vocabulary: often the largest tensor of all.
            logits = self.head(self.ln(h[:, -keep:])).float()
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[:, -keep:].reshape(-1))

    return CausalLM()


def train(cfg, out_dir):
    import torch
    from torch.utils.data import DataLoader

    torch.manual_seed(cfg["seed"])
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    precision = cfg["precision"]
    if not cuda and precision == "fp16":
        print("train_torch: fp16 needs a GPU; using fp32 on the CPU", flush=True)
        precision = "fp32"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[precision]
    where = torch.cuda.get_device_name(device) if cuda else "CPU"
    print(f"train_torch: {where}; {describe(cfg)}", flush=True)

    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    # torch.amp.GradScaler from PyTorch 2.3; torch.cuda.amp's warns from then on.
    scaler_of = getattr(torch.amp, "GradScaler", None)
    fp16 = cuda and dtype == torch.float16
    scaler = scaler_of("cuda", enabled=fp16) if scaler_of else torch.cuda.amp.GradScaler(enabled=fp16)
    workers = cfg["num_data_workers"]
    gen = torch.Generator().manual_seed(cfg["seed"])
    data = DataLoader(Progressions(cfg["seed"], cfg["dataset_size"], cfg["max_length"], cfg["vocab_size"]),
                      batch_size=cfg["batch_size"], shuffle=True, drop_last=True, num_workers=workers,
                      pin_memory=cuda, persistent_workers=workers > 0, generator=gen)

    def batches():
        while True:
            yield from data

    def autocast():
        if dtype is None:
            return torch.autocast(device.type, enabled=False)
        return torch.autocast(device.type, dtype=dtype)

    stream, accum, began, tty = batches(), cfg["gradient_accumulation_steps"], time.time(), sys.stdout.isatty()
    model.train()
    for step in range(1, cfg["steps"] + 1):
        total = 0.0
        for _ in range(accum):
            seq = next(stream).to(device, non_blocking=True)
            with autocast():
                loss = model(seq[:, :-1], seq[:, 1:]) / accum  # the mean over the effective batch
            scaler.scale(loss).backward()
            total += loss.item()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if tty or step == cfg["steps"] or step % max(1, cfg["steps"] // 20) == 0:
            print(progress_line(step, cfg["steps"], time.time() - began, total), end="\r" if tty else "\n", flush=True)
    if tty:
        print()

    model.eval()
    held_out = DataLoader(Progressions(cfg["seed"], cfg["eval_batches"] * cfg["batch_size"], cfg["max_length"],
                                       cfg["vocab_size"], offset=cfg["dataset_size"]), batch_size=cfg["batch_size"])
    losses = []
    with torch.no_grad():
        for seq in held_out:
            seq = seq.to(device)
            with autocast():
                losses.append(model(seq[:, :-1], seq[:, 1:]).item())
    elapsed = time.time() - began
    metrics = {
        "eval_loss": sum(losses) / len(losses),
        "train_loss": total,
        "steps": cfg["steps"],
        "effective_batch": effective_batch(cfg),
        "tokens_per_s": cfg["steps"] * effective_batch(cfg) * cfg["max_length"] / elapsed,
        "seconds": elapsed,
        "device": where,
        "peak_gpu_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
    }
    metrics["eval_perplexity"] = math.exp(min(metrics["eval_loss"], 50))
    peak = metrics["peak_gpu_memory_bytes"]
    print(f"final: eval_loss={metrics['eval_loss']:.4f} ppl={metrics['eval_perplexity']:.2f}"
          f" effective_batch={metrics['effective_batch']} tokens/s={metrics['tokens_per_s']:.0f}"
          + (f" peak_allocated={peak / 2**30:.2f}GiB" if peak is not None else ""), flush=True)
    with open(os.path.join(out_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    return metrics


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="the config gpuq rendered for this attempt")
    args = ap.parse_args(argv)
    try:
        cfg = settle(load_config(args.config))
    except (OSError, ConfigError) as e:
        print(f"train_torch: {e}", file=sys.stderr)
        return 2
    train(cfg, os.path.dirname(os.path.abspath(args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
