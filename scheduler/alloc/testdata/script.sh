#!/bin/bash
# gpuq allocation queue 3: one gpuq worker on each node, for the daemon's queued jobs.
# A worker idle for 10m exits, and the allocation ends with the last.
#SBATCH --job-name=gpuq-3
#SBATCH --time=8:30:00
#SBATCH --gpus-per-node=4
#SBATCH --ntasks-per-node=1
#SBATCH --output='/home/u/.local/state/gpuq/allocs/slurm-%j.log'
#SBATCH --partition gpu
#SBATCH --exclusive
#SBATCH '--comment=it'\''s mine'
#SBATCH -A 'proj x'
srun --ntasks-per-node=1 --cpus-per-task="$SLURM_CPUS_ON_NODE" --kill-on-bad-exit=0 /home/u/bin/gpuq worker --server login1:7070 --idle-timeout 10m
