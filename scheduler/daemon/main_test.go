package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// The tests run daemons in-process. Supervisors are processes of their own (that is
// their point): the test binary runs as one when started in the supervisor mode, and
// as a daemon of its own for the one test that kills a daemon with SIGKILL.

// asDaemon makes the test binary a daemon on the state directory it names; withPorts
// makes it listen (--listen) and serve metrics (--metrics) on ports of 127.0.0.1.
const (
	asDaemon  = "GPUQ_TEST_DAEMON"
	withPorts = "GPUQ_TEST_PORTS"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == launcher.SupervisorMode {
		if err := launcher.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv(asDaemon); dir != "" {
		cfg := testConfig(dir, os.Getenv("GPUQ_SIM_LEDGER"), os.Stderr)
		if os.Getenv(withPorts) != "" {
			cfg.Listen, cfg.Metrics = "127.0.0.1:0", "127.0.0.1:0"
		}
		if err := Run(context.Background(), cfg); err != nil {
			fmt.Fprintln(os.Stderr, "daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testConfig is a daemon on two simulated cards of 24 GiB that samples them often.
func testConfig(dir, ledger string, log *os.File) Config {
	return Config{StateDir: dir, Machine: plans.Overrides{GPUs: plans.Override{Value: "sim:2x24GiB", Source: "test"}},
		Inventory: nvidia.Options{Ledger: ledger}, Poll: 100 * time.Millisecond, Supervisor: []string{os.Args[0]},
		Self: os.Args[0], Version: "test", Log: log}
}

// running is a daemon running in the test's process.
type running struct {
	cfg    Config
	client *api.Client
	log    *schedtest.Buffer
	cancel context.CancelFunc
	ended  chan struct{} // closed when Run has returned, with err
	err    error
}

// startDaemon runs a daemon in-process on a fresh state directory and connects to it.
// It is stopped, with whatever trainers it left, when the test ends.
func startDaemon(t *testing.T) *running {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	return startDaemonOn(t, dir, t.TempDir())
}

func startDaemonOn(t *testing.T, dir, ledger string) *running {
	t.Helper()
	return startDaemonWith(t, testConfig(dir, ledger, nil))
}

func startDaemonWith(t *testing.T, cfg Config) *running {
	t.Helper()
	log := &schedtest.Buffer{}
	cfg.Log = log
	r := &running{cfg: cfg, log: log, ended: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		r.err = Run(ctx, cfg)
		close(r.ended)
	}()
	t.Cleanup(func() {
		// The trainers a test leaves stop with the daemon.
		select {
		case <-r.ended:
		default:
			if _, err := r.client.Stop(true); err != nil {
				t.Errorf("stop the daemon and its trainers: %v", err)
			}
		}
		r.stop(t)
	})
	schedtest.WaitFor(t, "the daemon to answer", func() bool {
		select {
		case <-r.ended:
			t.Fatalf("the daemon ended: %v\n%s", r.err, log)
		default:
		}
		c, err := api.Dial(cfg.StateDir)
		r.client = c
		return err == nil
	})
	return r
}

// stop stops the daemon, leaving its trainers running, and waits for it to end.
func (r *running) stop(t *testing.T) {
	r.cancel()
	<-r.ended
	if r.err != nil {
		t.Errorf("the daemon ended with %v", r.err)
	}
	r.err = nil
}

func writeSweep(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// submit sends the sweep file at path as gpuq submit does.
func submit(t *testing.T, c *api.Client, path string) (api.SubmitResponse, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.Submit(api.SubmitRequest{File: path, Source: string(data), Environ: os.Environ()})
}

func mustJobs(t *testing.T, c *api.Client, sweep string, states ...string) []api.Job {
	t.Helper()
	jobs, err := c.Jobs(sweep, states)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func countState(jobs []api.Job, state string) int {
	n := 0
	for _, j := range jobs {
		if j.State == state {
			n++
		}
	}
	return n
}
