package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// The daemon's figures, measured on the real binary: its memory with a long history, and
// how soon a freed slot runs the next trainer.

// daemonFigures are what benchDaemon measures.
type daemonFigures struct {
	historyJobs    int
	replay         time.Duration // start to answering, with the history to replay
	rssIdle        int64         // after start
	rssListed      int64         // after serving status --json of the whole history
	latencies      []time.Duration
	latencyDaemons int64 // the daemon's RSS after the latency run
}

// benchDaemon runs gpuq (the binary at bin) as a daemon twice, on simulated cards: over
// a state directory holding history jobs that have run, then with one slot and a sweep
// of samples+1 short trainers, one after the other.
func benchDaemon(bin string, history, samples int) (daemonFigures, error) {
	f := daemonFigures{historyJobs: history}
	tmp, err := os.MkdirTemp("", "gpuq-bench-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(tmp)
	state := filepath.Join(tmp, "history")
	if err := writeHistory(state, filepath.Join(tmp, "history.yaml"), history); err != nil {
		return f, err
	}
	start := time.Now()
	d, err := startBenchDaemon(bin, state, "1")
	if err != nil {
		return f, err
	}
	f.replay = time.Since(start)
	f.rssIdle = rssOf(d.Process.Pid)
	var list struct{ Jobs []json.RawMessage }
	if err := gpuqJSON(bin, state, &list, "status", "--json"); err != nil {
		stopBenchDaemon(bin, state, d)
		return f, err
	}
	if len(list.Jobs) != history {
		stopBenchDaemon(bin, state, d)
		return f, fmt.Errorf("the daemon lists %d jobs of the %d in its history", len(list.Jobs), history)
	}
	f.rssListed = rssOf(d.Process.Pid)
	stopBenchDaemon(bin, state, d)

	state = filepath.Join(tmp, "latency")
	d, err = startBenchDaemon(bin, state, "1")
	if err != nil {
		return f, err
	}
	defer stopBenchDaemon(bin, state, d)
	sweep := filepath.Join(tmp, "latency.yaml")
	// Each trainer prints the time first thing and last thing: the first is its
	// first byte of output, the last is when its slot frees (it exits right after).
	doc := fmt.Sprintf(`name: latency
command: [sh, -c, "date +%%s%%N; sleep 0.05; date +%%s%%N"]
matrix: {seed: [%s]}
memory: 1GiB
gpu_plan: "1"
`, seq(samples+1))
	if err := os.WriteFile(sweep, []byte(doc), 0o644); err != nil {
		return f, err
	}
	if out, err := gpuqCmd(bin, state, "submit", sweep).CombinedOutput(); err != nil {
		return f, fmt.Errorf("submit: %v: %s", err, out)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var done struct{ Jobs []json.RawMessage }
		if err := gpuqJSON(bin, state, &done, "status", "--json", "--state", "succeeded,failed,cancelled"); err != nil {
			return f, err
		}
		if len(done.Jobs) == samples+1 {
			break
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("the latency sweep did not finish in 5 minutes")
		}
	}
	f.latencyDaemons = rssOf(d.Process.Pid)
	type span struct{ first, last int64 }
	var spans []span
	for i := 1; i <= samples+1; i++ {
		stamps, err := stampsOf(filepath.Join(state, "attempts", fmt.Sprintf("latency.%d", i), "attempt-1", "log"))
		if err != nil {
			return f, err
		}
		if len(stamps) != 2 {
			return f, fmt.Errorf("latency.%d printed %d time stamps, want 2", i, len(stamps))
		}
		spans = append(spans, span{stamps[0], stamps[1]})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.first - b.first) })
	for i := 1; i < len(spans); i++ {
		f.latencies = append(f.latencies, time.Duration(spans[i].first-spans[i-1].last))
	}
	return f, nil
}

func seq(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(parts, ", ")
}

// writeHistory writes a state directory in which n jobs of one sweep have each run
// once and succeeded, as a daemon's journal would after running them.
func writeHistory(dir, sweepFile string, n int) error {
	doc := fmt.Sprintf("name: history\ncommand: [true, --seed, \"{seed}\", --lr, \"{lr}\"]\nparams: {batch_size: 16, gradient_accumulation_steps: 2}\nmatrix: {seed: [%s], lr: [0.001]}\nmemory: 9GiB\n", seq(n))
	if err := os.WriteFile(sweepFile, []byte(doc), 0o644); err != nil {
		return err
	}
	sw, err := plans.LoadSweep(sweepFile, plans.Overrides{})
	if err != nil {
		return err
	}
	st, err := state.OpenState(dir, func(string) {})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		return err
	}
	at := time.Now().Add(-time.Hour)
	var done state.Change
	for _, j := range st.View().Jobs() {
		c := *j
		c.State, c.Attempts = state.JobSucceeded, 1
		a := &state.Attempt{ID: state.AttemptID(j.ID, 1), Job: j.ID, Shape: j.Shape, N: 1, GPUs: []int{0},
			Params: j.Current, Estimate: j.Estimate, Reserve: j.Estimate, Leader: 1000, Peak: 8 << 30,
			Started: at, Ended: at.Add(time.Minute), Outcome: plans.Success,
			Log: filepath.Join(dir, "attempts", j.ID, "attempt-1", "log")}
		done.Jobs, done.Attempts = append(done.Jobs, &c), append(done.Attempts, a)
	}
	if err := st.Put(done); err != nil {
		return err
	}
	return st.Compact()
}

func gpuqCmd(bin, state string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GPUQ_STATE_DIR="+state, "GPUQ_GPUS=sim:1x24GiB", "GPUQ_SIM_LEDGER="+state+"-ledger")
	return cmd
}

func gpuqJSON(bin, state string, v any, args ...string) error {
	out, err := gpuqCmd(bin, state, args...).Output()
	if err != nil {
		return fmt.Errorf("gpuq %s: %w", strings.Join(args, " "), err)
	}
	return json.Unmarshal(out, v)
}

func startBenchDaemon(bin, state, plan string) (*exec.Cmd, error) {
	cmd := gpuqCmd(bin, state, "daemon", "--gpu-plan", plan)
	ask := func() *exec.Cmd { return gpuqCmd(bin, state, "status", "--state", "running") }
	if err := startAnswering(cmd, state, state+".log", ask, time.Minute); err != nil {
		return nil, err
	}
	return cmd, nil
}

// startAnswering starts daemon on the state directory state, its output in logPath
// (appended to: a restart's follows the first start's), and waits until it answers on
// its socket and ask, a gpuq command, succeeds against it. The socket first: a gpuq
// that finds none reads the state the last daemon left, and answers as if the daemon
// did.
func startAnswering(daemon *exec.Cmd, state, logPath string, ask func() *exec.Cmd, limit time.Duration) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	daemon.Stdout, daemon.Stderr = logf, logf
	if err := daemon.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := api.Dial(state); err == nil && ask().Run() == nil {
			return nil
		}
	}
	daemon.Process.Kill()
	daemon.Wait()
	log, _ := os.ReadFile(logPath)
	return fmt.Errorf("the daemon does not answer: %s", lastLine(string(log)))
}

func stopBenchDaemon(bin, state string, d *exec.Cmd) {
	gpuqCmd(bin, state, "daemon", "--stop", "--stop-trainers").Run()
	d.Wait()
}

// rssOf is a process's resident set, from /proc; 0 when it cannot be read.
func rssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stampsOf reads the nanosecond time stamps a latency trainer printed in its log.
func stampsOf(path string) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []int64
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if v, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64); perr == nil && v > 1e18 {
			out = append(out, v)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func printDaemon(w io.Writer, f daemonFigures) {
	fmt.Fprintf(w, "\nDaemon (the gpuq binary, simulated cards)\n\n")
	fmt.Fprintf(w, "  history of %d finished jobs: started and answering in %s; RSS %s idle, %s after status --json of every job\n",
		f.historyJobs, f.replay.Round(time.Millisecond), plans.FormatSize(f.rssIdle), plans.FormatSize(f.rssListed))
	lat := slices.Clone(f.latencies)
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	fmt.Fprintf(w, "  slot free to the next trainer's first byte of output, %d samples: median %s, p90 %s, min %s, max %s (RSS %s after)\n",
		len(lat), q(0.5), q(0.9), lat[0].Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), plans.FormatSize(f.latencyDaemons))
}
