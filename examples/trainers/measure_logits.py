#!/usr/bin/env python3
"""Measures what PyTorch holds for the logits of train_torch.py's loss, on the CPU.

gpuq's memory estimate counts LogitBytes (plans/estimate.go) for each logit, one
position's score of one token of the vocabulary. This script checks that figure: it runs
one forward and backward pass of train_torch.py's model under torch.profiler with
profile_memory, replays the allocations and frees in time order to find the peak of
live tensor memory, and does so at two vocabulary sizes. Everything but the logits is
the same in both runs, so the difference of the peaks over the difference in logits is
what the loss holds per logit at its peak. The weights that grow with the vocabulary
(embedding, output head) are kept small against the logits (d_model 64, 1024 tokens a
batch): the 16-bit copy of the head that autocast keeps adds 2 × 64 / 1024 = 0.125
bytes to the bf16 figure.

  python3 examples/trainers/measure_logits.py [--json]

Works with PyTorch 1.13 and 2.x, on the CPU; a GPU is not needed.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_torch  # noqa: E402


def peak_bytes(vocab, precision, batch, length):
    """The peak of live CPU tensor bytes over one forward and backward pass."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cfg = train_torch.settle({"vocab_size": vocab, "max_length": length, "d_model": 64, "n_heads": 2,
                              "n_layers": 1, "batch_size": batch, "precision": precision})
    torch.manual_seed(0)
    model = train_torch.build_model(cfg)
    seq = torch.randint(0, vocab, (batch, length + 1))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
    # An op's own allocations count from its start, its frees from its end: a parent
    # that frees what its child used must not be seen freeing it before the child ran.
    changes = sorted((e.time_range.start if e.self_cpu_memory_usage > 0 else e.time_range.end, e.self_cpu_memory_usage)
                     for e in prof.events() if e.self_cpu_memory_usage)
    live = most = 0
    for _, delta in changes:
        live += delta
        most = max(most, live)
    return most


def bytes_per_logit(precision, small=4000, large=20000, batch=4, length=256):
    grown = peak_bytes(large, precision, batch, length) - peak_bytes(small, precision, batch, length)
    return grown / (batch * length * (large - small))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help='print {"bf16": bytes, "fp32": bytes}')
    args = ap.parse_args()
    got = {p: bytes_per_logit(p) for p in ("bf16", "fp32")}
    if args.json:
        print(json.dumps(got))
        return
    for p, b in got.items():
        print(f"{p}: the loss holds {b:.2f} bytes per logit at the step's peak")


if __name__ == "__main__":
    main()
