#!/usr/bin/env bash
# gpuq against a real Slurm: `make slurm-check`, or
#
#     examples/slurmcheck/slurm-check.sh bin/gpuq
#
# It installs Debian's slurmctld, slurmd and munge (as root, where they are missing),
# starts a cluster of one node on this machine by hand (munged, slurmctld and slurmd
# with a generated slurm.conf in a temporary directory, on free ports; no systemd), with
# two GPUs that Slurm hands out as it would real ones (gres over two dummy device nodes)
# and that gpuq's workers simulate. Then, as a researcher on a login node would:
#
#   1. gpuq daemon --listen --gpus none, on its own state directory;
#   2. gpuq alloc slurm --gpus-per-node 2: its batch script is accepted by sbatch
#      --test-only, and --dry-run prints it;
#   3. gpuq submit a sweep of simulated trainers, and gpuq wait for it: every job must
#      succeed, on the workers of an allocation Slurm started;
#   4. the workers, idle, exit, and the allocation ends COMPLETED before its time limit.
#
# It prints PASS or FAIL for each, exits 0 when all pass, and stops every daemon it
# started (and cancels every Slurm job) whatever happens. Where it cannot run (not
# root, no apt-get to install Slurm, no device nodes allowed) it says so and exits 0.
set -euo pipefail

GPUQ=$(realpath "${1:?usage: slurm-check.sh PATH-TO-GPUQ}")
HERE=$(cd "$(dirname "$0")" && pwd)
FAILED=0

say() { printf 'slurm-check: [%3ds] %s\n' "$SECONDS" "$*"; }
pass() { say "PASS $*"; }
fail() {
	say "FAIL $*"
	FAILED=1
}

install_slurm() {
	if [ "$(id -u)" != 0 ]; then
		say "slurmd runs as root, and this is not: skipped"
		exit 0
	fi
	if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
		return 0
	fi
	if ! command -v apt-get >/dev/null; then
		say "no Slurm here, and no apt-get to install it: skipped"
		exit 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	local pkgs=(slurmctld slurmd munge)
	apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; }
}

# free_port prints a TCP port nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for CMD... retries CMD for up to a minute.
wait_for() {
	local i
	for i in $(seq 600); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# start_cluster starts munged, slurmctld and slurmd for a one-node cluster in $CLUSTER.
start_cluster() {
	# munged wants every directory above its socket searchable by all, and a socket path
	# fits in 107 bytes: a short directory of its own, not under a long TMPDIR.
	CLUSTER=$(mktemp -d /tmp/gpuq-slurm.XXXXXX)
	chmod 0711 "$CLUSTER"
	mkdir -m 0700 "$CLUSTER/state" "$CLUSTER/spool"
	head -c 1024 /dev/urandom >"$CLUSTER/munge.key"
	chmod 0400 "$CLUSTER/munge.key"
	munged --key-file="$CLUSTER/munge.key" --socket="$CLUSTER/munge.sock" --pid-file="$CLUSTER/munged.pid" \
		--log-file="$CLUSTER/munged.log" --seed-file="$CLUSTER/munged.seed"
	# Two GPUs for Slurm to hand out: gres needs device files, and any character device
	# will do (the workers' cards are simulated; Slurm sets CUDA_VISIBLE_DEVICES as on a
	# real node).
	if ! mknod -m 0666 "$CLUSTER/gpu0" c 1 3 || ! mknod -m 0666 "$CLUSTER/gpu1" c 1 3; then
		say "cannot make device nodes here (a container without CAP_MKNOD?): skipped"
		exit 0
	fi
	local host
	host=$(hostname)
	cat >"$CLUSTER/slurm.conf" <<EOF
ClusterName=gpuqcheck
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$CLUSTER/munge.sock
CredType=cred/munge
StateSaveLocation=$CLUSTER/state
SlurmdSpoolDir=$CLUSTER/spool
SlurmctldPidFile=$CLUSTER/slurmctld.pid
SlurmdPidFile=$CLUSTER/slurmd.pid
SlurmctldLogFile=$CLUSTER/slurmctld.log
SlurmdLogFile=$CLUSTER/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
NodeName=gpuqnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$(nproc) Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=gpuqnode Default=YES MaxTime=INFINITE State=UP
EOF
	echo "NodeName=gpuqnode Name=gpu File=$CLUSTER/gpu[0-1]" >"$CLUSTER/gres.conf"
	export SLURM_CONF=$CLUSTER/slurm.conf
	slurmctld -f "$SLURM_CONF"
	slurmd -f "$SLURM_CONF" -N gpuqnode
	if ! wait_for node_idle; then
		say "the one-node cluster did not come up:"
		sinfo -N -o '%N %T %E' || true
		tail -5 "$CLUSTER/slurmctld.log" "$CLUSTER/slurmd.log" || true
		return 1
	fi
}

node_idle() { [ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ]; }

# stop_cluster ends what start_cluster started, the jobs first, each daemon by its pid.
stop_cluster() {
	[ -n "${CLUSTER:-}" ] || return 0
	if [ -f "$CLUSTER/slurmctld.pid" ]; then
		scancel --user="$(id -un)" 2>/dev/null || true
		wait_for no_jobs || say "Slurm jobs left running: $(squeue -h -o '%i %T' | tr '\n' ' ')"
	fi
	local d pid
	for d in slurmd slurmctld munged; do
		pid=$(cat "$CLUSTER/$d.pid" 2>/dev/null) || continue
		kill "$pid" 2>/dev/null || continue
		wait_for gone "$pid" || kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$CLUSTER"
}

no_jobs() { [ -z "$(squeue -h -o %i 2>/dev/null)" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# check_gpuq runs a sweep through gpuq alloc slurm on the cluster, as a researcher would
# from a login node.
check_gpuq() {
	local gq=$CLUSTER/gpuq
	mkdir -m 0700 "$gq"
	# gpuq's state, config and simulated cards of this check alone; no machine setting of
	# the caller's.
	export GPUQ_STATE_DIR=$gq/state XDG_STATE_HOME=$gq/xdg XDG_CONFIG_HOME=$gq/config XDG_RUNTIME_DIR=$gq/run \
		GPUQ_SIM_LEDGER=$gq/ledger
	unset GPUQ_GPUS GPUQ_GPU_PLAN GPUQ_HEADROOM GPUQ_SERVER GPUQ_CONFIG CUDA_VISIBLE_DEVICES

	# 1. The daemon, on the "login node": no cards of its own, listening for workers.
	"$GPUQ" daemon --listen "127.0.0.1:$(free_port)" --gpus none >"$gq/daemon.log" 2>&1 &
	DAEMON=$!
	if ! wait_for "$GPUQ" status; then
		fail "gpuq daemon --listen did not answer:"
		tail -5 "$gq/daemon.log"
		return
	fi
	pass "gpuq daemon --listen --gpus none runs"

	# 2. An allocation queue: two GPUs a node, workers on simulated cards.
	local queue=(--gpus-per-node 2 --time 10m --idle-timeout 20s --gpus sim:2x24GiB)
	if "$GPUQ" alloc slurm "${queue[@]}" --dry-run >"$gq/workers.sh" && sbatch --test-only "$gq/workers.sh" 2>/dev/null; then
		pass "gpuq alloc slurm --dry-run prints a script sbatch takes"
	else
		fail "the --dry-run script:"
		cat "$gq/workers.sh"
	fi
	if "$GPUQ" alloc slurm "${queue[@]}"; then
		pass "gpuq alloc slurm adds a queue"
	else
		fail "gpuq alloc slurm"
		return
	fi

	# 3. A sweep of simulated trainers, two on each card: only the allocation's worker
	# can run it.
	cat >"$gq/sweep.yaml" <<EOF
name: slurm-check
command: [python3, $(realpath "$HERE/../trainers/simtrain.py"), --config, "{config}"]
config: {format: json}
params: {batch_size: 16, gradient_accumulation_steps: 2, gradient_checkpointing: false, num_data_workers: 4,
         sim_base: 3GiB, sim_activations: 6GiB, sim_seconds: 3}
matrix: {seed: [1, 2, 3, 4, 5, 6]}
memory: 10GiB
EOF
	"$GPUQ" submit "$gq/sweep.yaml"
	if timeout 300 "$GPUQ" wait --sweep slurm-check; then
		pass "every job of the sweep succeeded"
	else
		fail "the sweep did not finish:"
		"$GPUQ" status || true
		"$GPUQ" alloc list || true
		tail -20 "$gq/daemon.log" "$gq/state/allocs/"*.log 2>/dev/null || true
		return
	fi
	local workers
	workers=$("$GPUQ" status --json | python3 -c '
import json, sys
print(" ".join(sorted({a["worker"] for j in json.load(sys.stdin)["jobs"] for a in j["attempts"]})))')
	if [[ $workers == gpuqnode-* ]]; then
		pass "the jobs ran on the allocation's worker ($workers)"
	else
		fail "the jobs ran on: $workers"
	fi

	# 4. Idle, the worker exits; the allocation ends well before its time limit.
	if wait_for_allocation_end; then
		pass "the idle worker left and the allocation ended: $("$GPUQ" alloc list | grep -E '^  [0-9]')"
	else
		fail "the allocation did not end:"
		"$GPUQ" alloc list || true
		squeue -t all || true
	fi
}

# wait_for_allocation_end waits up to two minutes for the queue's allocations to have
# ended COMPLETED, as gpuq sees them.
wait_for_allocation_end() {
	local i
	for i in $(seq 120); do
		if "$GPUQ" alloc list --json | python3 -c '
import json, sys
allocs = [a for q in json.load(sys.stdin)["queues"] for a in q["allocations"]]
sys.exit(not allocs or any(a["state"] != "ended" or a.get("slurm_state") != "COMPLETED" or a["workers"] < 1 for a in allocs))'; then
			return 0
		fi
		sleep 1
	done
	return 1
}

# stop_gpuq stops the daemon the check started, and every trainer.
stop_gpuq() {
	[ -n "${DAEMON:-}" ] || return 0
	"$GPUQ" daemon --stop --stop-trainers >/dev/null 2>&1 || kill "$DAEMON" 2>/dev/null || true
	wait "$DAEMON" 2>/dev/null || true
	DAEMON=
}

# left_behind fails if a process of gpuq's (a worker, a supervisor, a trainer: each
# names a path of the check's state) outlived its allocation and daemon, and ends it.
left_behind() {
	local pids
	pids=$(pgrep -f -- "$CLUSTER/gpuq" || true)
	if [ -z "$pids" ]; then
		pass "no worker, supervisor or trainer is left running"
		return
	fi
	fail "left running:"
	ps -o pid,args -p "${pids//$'\n'/,}" || true
	kill $pids 2>/dev/null || true
}

main() {
	install_slurm
	trap 'stop_gpuq; stop_cluster' EXIT
	start_cluster
	say "a one-node Slurm cluster runs in $CLUSTER ($(sinfo -V))"
	check_gpuq
	stop_gpuq
	left_behind
	if [ "$FAILED" = 0 ]; then
		say "all passed"
	fi
	return "$FAILED"
}

main
