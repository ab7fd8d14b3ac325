package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestDaemonMetrics: a daemon opens no TCP port unless asked; with GPUQ_METRICS (or
// --metrics) it serves Prometheus metrics there, and with DCGM_HPC_JOB_MAPPING_DIR it
// names each card's jobs for dcgm-exporter; an address that is no host:port is bad
// input.
func TestDaemonMetrics(t *testing.T) {
	dir := daemonEnv(t)
	before := listeningTCP(t)
	startDaemon(t)
	if after := listeningTCP(t); len(after) != len(before) {
		t.Errorf("a daemon asked for no metrics listens on TCP: %v (before it started: %v)", after, before)
	}
	stopAll(t, dir)

	t.Setenv("GPUQ_METRICS", "127.0.0.1:0")
	jobMap := t.TempDir()
	t.Setenv("DCGM_HPC_JOB_MAPPING_DIR", jobMap)
	log := startDaemon(t)
	m := regexp.MustCompile(`serving Prometheus metrics on (http://\S+/metrics)`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("the daemon's log does not say where its metrics are:\n%s", log)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gpuq_jobs{state="queued"} 0`, `gpuq_gpu_memory_total_bytes{gpu="1"} 2.5769803776e+10`, "gpuq_round_seconds_bucket"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}

	sweep := filepath.Join(t.TempDir(), "m.yaml")
	os.WriteFile(sweep, []byte("name: m\ncommand: [sleep, \"60\"]\njobs: [{}]\nmemory: 1GiB\n"), 0o644)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "dcgm-exporter's file of GPU 0 to name m.1", func() bool {
		b, _ := os.ReadFile(filepath.Join(jobMap, "0"))
		return string(b) == "m.1\n"
	})

	if _, errOut, code := cli(t, "daemon", "--metrics", "9469"); code != exitBadInput || !strings.Contains(errOut, "give host:port") {
		t.Errorf("--metrics 9469: exit %d: %s", code, errOut)
	}
}

// listeningTCP lists this process's listening TCP sockets, from /proc.
func listeningTCP(t *testing.T) []string {
	t.Helper()
	mine := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ... inode
			f := strings.Fields(sc.Text())
			if len(f) > 9 && f[3] == "0A" && mine[f[9]] {
				out = append(out, f[1])
			}
		}
		f.Close()
	}
	return out
}
