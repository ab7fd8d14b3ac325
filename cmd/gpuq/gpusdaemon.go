package main

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// daemonGPUs prints the running daemon's cards, with its plan, drains and headroom and
// whose job each process is, and
// reports whether one answered. A daemon schedules on the machine it was started with,
// whatever gpuq would open by itself now; --gpus or --gpu-plan given here (flag or
// environment) ask for this machine instead.
func daemonGPUs(opts *gpusOptions) (bool, error) {
	st := opts.settings
	for _, flag := range []string{"gpus", "gpu-plan"} {
		if st.flags.Changed(flag) {
			return false, nil
		}
	}
	if ov := st.overrides(); ov.GPUs.Source == "GPUQ_GPUS" || ov.Plan.Source == "GPUQ_GPU_PLAN" {
		return false, nil
	}
	c, err := st.dial()
	var none api.NoDaemonError
	if errors.As(err, &none) {
		return false, nil // the cards gpuq would use itself
	}
	if err != nil {
		return true, err
	}
	m, err := c.Machine()
	if err != nil {
		return true, err
	}
	var slots []int // nil: no plan, as without a daemon
	if slices.ContainsFunc(m.Slots, func(n int) bool { return n >= 0 }) {
		for _, n := range m.Slots {
			if n < 0 {
				n = plans.NoSlotLimit
			}
			slots = append(slots, n)
		}
	}
	where := "on " + tildeHome(c.Dir())
	if st.remote() {
		where = "at " + st.v.GetString(keyServer)
	}
	workers, err := c.Workers()
	if err != nil {
		return true, err
	}
	whose, sep := "the cards of the daemon "+where, ","
	switch {
	case len(m.Cards) > 0:
	case slices.ContainsFunc(workers, func(w api.WorkerInfo) bool { return w.Connected }):
		whose = "the daemon " + where + " has no cards of its own: its workers'" // --gpus none
	default:
		// Its cards are its workers', and none is linked (none yet, or each away):
		// there are no cards to list, and what gives it some is a worker.
		server := "HOST:PORT"
		if st.remote() {
			server = st.v.GetString(keyServer)
		} else if addr := listeningAt(c.Dir()); addr != "" {
			server = addr
		}
		whose = "the daemon " + where + " has no cards of its own, and no worker linked: start one with gpuq worker --server " + server
		sep = ";"
	}
	fmt.Fprintln(opts.io.Err, wrapHanging("", "  ", fmt.Sprintf("gpuq: %s%s headroom %s, util_target %s (--gpus shows others)",
		whose, sep, m.Headroom, cmp.Or(m.UtilTarget, "1")), opts.io.width()))
	jobs := func(c gpu.Card, p gpu.Process) (string, string) {
		if job, _, ok := strings.Cut(p.Attempt, "/"); ok {
			return job, m.Names[job]
		}
		if st.remote() {
			return "", ""
		}
		return localJobs(c, p) // another gpuq's (a gpuq run), or the daemon could not tell yet
	}
	return true, writeGPUs(opts.io, machineView{cards: m.Cards, slots: slots, drained: m.Drained, simulated: m.Simulated, jobs: jobs,
		workers: workers, now: time.Now()}, opts.json)
}

// listeningAt is the address a daemon on the state directory dir listens on for
// workers, as a worker's --server takes it: its listen file's, with a host that
// names every address of the machine (--listen :7070) left for the reader to name
// ("HOST:7070"); "" where it listens nowhere, or the file cannot be read.
func listeningAt(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, api.ListenFile))
	if err != nil {
		return ""
	}
	addr := strings.TrimSpace(string(data))
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("HOST", port)
	}
	return addr
}
