#!/usr/bin/env python3
"""A trainer that runs out of GPU memory, catches it, goes on, and later dies of a
KeyError. The OOM text is in its output, but it is not how it ended: gpuq must call the
attempt failed, not requeue it as an OOM."""

import torch

total = torch.cuda.get_device_properties(0).total_memory
try:
    too_much = torch.empty(2 * total, dtype=torch.uint8, device="cuda")
except RuntimeError as e:  # torch.cuda.OutOfMemoryError from 1.13, a RuntimeError before
    if "out of memory" not in str(e):
        raise
    print(f"caught: {e}", flush=True)
    torch.cuda.empty_cache()
print("going on with a smaller batch", flush=True)
metrics = {"train_loss": 1.0}
print(metrics["val_acc"])
