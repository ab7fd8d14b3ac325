package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAGateHoldsSoManyStrangers: a gate of two slots closes a third connection at once;
// an admitted one no longer counts, and one not admitted within its time is closed.
func TestAGateHoldsSoManyStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(ln, 2, 500*time.Millisecond)
	refused := make(chan struct{}, 10)
	g.refused = func() { refused <- struct{}{} }
	defer g.Close()
	accepted := make(chan *gatedConn, 10)
	go func() {
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*gatedConn)
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn, within time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(within))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || errors.Is(err, net.ErrClosed) || err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	first, second := dial(), dial()
	a := <-accepted
	<-accepted
	third := dial()
	<-refused
	if !closed(third, 5*time.Second) {
		t.Error("a third stranger was held")
	}
	a.leave() // first showed the secret
	fourth := dial()
	<-accepted
	if closed(fourth, 100*time.Millisecond) {
		t.Error("a connection was refused with a slot free")
	}
	if closed(first, 800*time.Millisecond) {
		t.Error("an admitted connection was closed at the deadline")
	}
	if !closed(second, 5*time.Second) || !closed(fourth, 5*time.Second) {
		t.Error("a connection not admitted was held past its deadline")
	}
}

// TestAFloodOfStrangersStopsNothing: a daemon whose limit on open files is 256 (its
// soft limit, 64, raised to the hard one as it starts), flooded with a thousand
// connections that never say anything on --listen and a thousand on --metrics, runs a
// sweep to its end all the same, every job once, and still answers its workers and its
// scraper; it holds no more of those connections than its gates allow.
func TestAFloodOfStrangersStopsNothing(t *testing.T) {
	const limit, flood = 256, 1000
	d := startLimited(t, limit)
	if soft := openFilesLimit(t, d.cmd.Process.Pid); soft < limit-1 {
		t.Errorf("the daemon's limit on open files is %d; want it raised to %d", soft, limit-1)
	}
	info, err := d.client.Info()
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(d.log)
	m := regexp.MustCompile(`serving Prometheus metrics on http://(\S+)/metrics`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", log)
	}
	metrics := string(m[1])
	for _, addr := range []string{info.Listen, metrics} {
		for range flood {
			if conn, err := net.Dial("tcp", addr); err == nil {
				defer conn.Close()
			}
		}
	}
	sweep := writeSweep(t, "name: flooded\ncommand: [sh, -c, \"echo {seed}\"]\nmatrix: {seed: [1, 2, 3, 4, 5, 6, 7, 8]}\nmemory: 1GiB\ngpu_plan: \"2\"\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "every job to end", func() bool {
		d.alive(t)
		jobs := mustJobs(t, d.client, "flooded")
		return countState(jobs, "succeeded")+countState(jobs, "failed") == len(jobs)
	})
	for _, j := range mustJobs(t, d.client, "flooded") {
		if j.State != "succeeded" || len(j.Attempts) != 1 {
			t.Errorf("%s: %s, %d attempts (%s); want one, a success", j.ID, j.State, len(j.Attempts), j.Reason)
		}
	}
	if n := openFiles(t, d.cmd.Process.Pid); n > limit-64 {
		t.Errorf("the daemon holds %d descriptors of %d under the flood", n, limit)
	} else {
		t.Logf("the daemon holds %d descriptors of %d under the flood", n, limit)
	}
	// The flood still on, a worker with the secret, and a scrape, get in.
	creds, err := api.LoadCredentials(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "a client with the secret to get in", func() bool {
		rc, err := api.DialRemote(info.Listen, creds)
		if err != nil {
			return false
		}
		_, err = rc.Info()
		return err == nil
	})
	schedtest.WaitFor(t, "a scrape to get in", func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `gpuq_jobs{state="succeeded"} 8`)
	})
}

// limited is a daemon of its own process, its hard limit on open files set, listening
// (--listen) and serving metrics on ports of 127.0.0.1.
type limited struct {
	dir, log string
	cmd      *exec.Cmd
	client   *api.Client
	ended    chan error
}

// startLimited starts a limited daemon with a soft limit of 64 open files and a hard
// one of limit, and connects to it; it is stopped, with its trainers, when the test
// ends.
func startLimited(t *testing.T, limit int) *limited {
	t.Helper()
	d := &limited{dir: filepath.Join(t.TempDir(), "state"), log: filepath.Join(t.TempDir(), "daemon.log"), ended: make(chan error, 1)}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	d.cmd = exec.Command("sh", "-c", fmt.Sprintf(`ulimit -Sn 64 && ulimit -Hn %d && exec "$0"`, limit), os.Args[0])
	d.cmd.Env = append(os.Environ(), asDaemon+"="+d.dir, withPorts+"=1", "GPUQ_SIM_LEDGER="+t.TempDir())
	d.cmd.Stderr = logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.ended <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if c, err := api.Dial(d.dir); err == nil {
			c.Stop(true)
		}
		d.cmd.Process.Kill()
		if t.Failed() {
			log, _ := os.ReadFile(d.log)
			t.Logf("the daemon's log:\n%s", log)
		}
	})
	schedtest.WaitFor(t, "the daemon to answer", func() bool {
		d.alive(t)
		d.client, err = api.Dial(d.dir)
		return err == nil
	})
	return d
}

// alive fails the test if the daemon has ended.
func (d *limited) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-d.ended:
		t.Fatalf("the daemon ended: %v", err)
	default:
	}
}

// openFilesLimit is the soft limit on open files of process pid.
func openFilesLimit(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatal("no limit on open files in /proc/PID/limits")
	return 0
}

// openFiles is how many descriptors process pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
