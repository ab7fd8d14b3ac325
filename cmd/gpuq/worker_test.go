package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestDaemonWithAWorker: gpuq daemon --listen with no cards of its own, and gpuq worker
// on loopback: a submitted sweep runs on the worker, gpuq status says where, gpuq logs
// reads a worker's log through the daemon, gpuq --server reaches the daemon over the
// network, and gpuq report sizes the worker's card by its capacity.
func TestDaemonWithAWorker(t *testing.T) {
	dir := daemonEnv(t)
	log := &schedtest.Buffer{}
	go run([]string{"daemon", "--poll", "100ms", "--gpus", "none", "--listen", "127.0.0.1:0", "--worker-grace", "15s"},
		ioStreams{In: strings.NewReader(""), Out: log, Err: log})
	var addr string
	schedtest.WaitFor(t, "the daemon to listen", func() bool {
		data, err := os.ReadFile(filepath.Join(dir, api.ListenFile))
		addr = strings.TrimSpace(string(data))
		return err == nil && addr != ""
	})
	// Before a worker links, the daemon has no card anywhere: gpuq gpus says so, and
	// what gives it some (a worker, at the address it listens on), and prints no table
	// of cards with nothing under its header.
	t.Setenv("GPUQ_GPUS", "")
	if out, errOut, code := cli(t, "gpus"); code != exitOK || out != "" ||
		!strings.Contains(errOut, "has no cards of its own, and no worker linked: start one with gpuq worker --server "+addr+"; headroom") {
		t.Errorf("gpuq gpus with no worker linked: exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("GPUQ_GPUS", "sim:2x24GiB")
	startWorker(t, addr, "node7", func() { t.Logf("daemon:\n%s", log) })
	sweep := filepath.Join(t.TempDir(), "w.yaml")
	os.WriteFile(sweep, []byte("name: w\ncommand: [sh, -c, \"echo on the worker {seed}\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n"), 0o644)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "both jobs to succeed on the worker", func() bool {
		c, err := api.Dial(dir)
		if err != nil {
			return false
		}
		jobs, _ := c.Jobs("w", []string{"succeeded"})
		return len(jobs) == 2
	})
	if out, _, _ := cli(t, "status", "w.1"); !strings.Contains(out, "node7:0") {
		t.Errorf("gpuq status w.1 does not say the job ran on node7's card 0:\n%s", out)
	}
	// The log is the worker's, read through the daemon: here, and over the network.
	for _, args := range [][]string{{"logs", "w.2"}, {"--server", addr, "logs", "w.2", "--tail", "3"}} {
		if out, errOut, code := cli(t, args...); code != exitOK || !strings.Contains(out, "on the worker 2") {
			t.Errorf("gpuq %v: exit %d, %q %s", args, code, out, errOut)
		}
	}
	if out, errOut, code := cli(t, "--server", addr, "status"); code != exitOK || !strings.Contains(out, "2 succeeded") {
		t.Errorf("gpuq --server status: exit %d:\n%s%s", code, out, errOut)
	}
	// The report sizes the worker's card by its capacity, as it does the daemon's own.
	page := filepath.Join(t.TempDir(), "w.html")
	if _, errOut, code := cli(t, "report", "w", "-o", page); code != exitOK {
		t.Errorf("gpuq report w: exit %d: %s", code, errOut)
	} else if html, _ := os.ReadFile(page); !strings.Contains(string(html), `class="capacity"`) || !strings.Contains(string(html), "24.00 GiB") {
		t.Errorf("the report of a sweep that ran on a worker's card draws no capacity for it")
	}
	// gpuq gpus lists the daemon's workers and their cards, as drain names them (the
	// daemon's cards, not those GPUQ_GPUS names).
	t.Setenv("GPUQ_GPUS", "")
	if out, errOut, code := cli(t, "gpus"); code != exitOK || !strings.Contains(out, "WORKER") || !strings.Contains(out, "node7") || !strings.Contains(out, "node7:0 24.00") ||
		!strings.Contains(errOut, "has no cards of its own: its workers', headroom") {
		t.Errorf("gpuq gpus: exit %d:\n%s%s", code, out, errOut)
	}
	if out, _, code := cli(t, "gpus", "--json"); code != exitOK || !strings.Contains(out, `"workers"`) || !strings.Contains(out, `"name": "node7"`) {
		t.Errorf("gpuq gpus --json: exit %d:\n%s", code, out)
	}
}

func TestWorkerBadInput(t *testing.T) {
	dir := daemonEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "gpuq worker needs --server HOST:PORT"},
		{[]string{"worker", "--server", "x:1", "--name", "node:7"}, `--name: "node:7" cannot name a worker`},
		// Of the characters a name may have, but not first: the message says so.
		{[]string{"worker", "--server", "x:1", "--name", ".."}, `".." cannot name a worker: letters, digits, '.', '_' and '-' (a host name), beginning with a letter or a digit`},
		{[]string{"daemon", "--gpus", "none"}, "a daemon with no cards of its own runs jobs on its workers: give it --listen ADDR"},
		{[]string{"daemon", "--worker-grace", "0s"}, "--worker-grace 0s is too short"},
		{[]string{"daemon", "--listen", ":0", "--worker-grace", "10s"}, "then 10s from SIGTERM to SIGKILL, and a margin of 2.1s; give at least 15s"},
		{[]string{"drain", "node7:x"}, `"node7:x" is not a card (3, or WORKER:3`},
		// An address that cannot be one is no daemon to try again and again.
		{[]string{"worker", "--server", "127.0.0.1:99999"}, `--server "127.0.0.1:99999": port "99999" is not a number of 1 to 65535: give host:port`},
		{[]string{"worker", "--server", "login1"}, `--server "login1": address login1: missing port in address`},
		{[]string{"--server", "login1:0", "status"}, `--server "login1:0": port "0" is not a number of 1 to 65535`},
		// Refused before anything is kept of the start (machine.json).
		{[]string{"daemon", "--gpus", "none", "--listen", "garbage"}, `--listen "garbage": address garbage: missing port in address: give host:port, e.g. :7070`},
	} {
		if _, errOut, code := cli(t, tt.args...); code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	// The daemon refused for its --listen kept nothing: the next start is not told of
	// "the last daemon's" cards.
	if _, err := os.Stat(filepath.Join(dir, "machine.json")); !os.IsNotExist(err) {
		t.Errorf("a daemon refused for its --listen left machine.json: %v", err)
	}
}

// startWorker starts gpuq worker name on one simulated card, linked to the daemon
// listening at addr, and stops it (SIGTERM) when the test ends; where the test failed,
// its log is shown, after what failed tells.
func startWorker(t *testing.T, addr, name string, failed func()) {
	t.Helper()
	worker := exec.Command(os.Args[0], "worker", "--server", addr, "--name", name, "--gpus", "sim:1x24GiB", "--poll", "100ms")
	worker.Stderr = &schedtest.Buffer{}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		worker.Process.Signal(syscall.SIGTERM)
		worker.Wait()
		if t.Failed() {
			failed()
			t.Logf("worker %s:\n%s", name, worker.Stderr)
		}
	})
}
