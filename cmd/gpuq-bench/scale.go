package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The daemon at scale: a sweep of many jobs queued on the built binary, and what its
// verbs cost then (the targets of "a daemon that stays quick at 100,000 jobs").

// scaleFigures are one run of benchScale. Durations are wall time of the gpuq verb as a
// user runs it (process start included); RSS is the daemon's.
type scaleFigures struct {
	jobs          int
	submit        time.Duration
	statusRunning time.Duration // status --state running, the cards drained: nothing runs
	statusJSON    time.Duration // status --json of every job
	jsonBytes     int
	why           time.Duration
	hold, release time.Duration
	cancel, retry time.Duration
	waitAll       time.Duration // wait --sweep, every job ended (cancelled)
	waitSome      time.Duration // wait of waitSomeJobs ids, ended
	restartClean  time.Duration // daemon --stop, then a new daemon answering
	restart       time.Duration // kill -9, then a new daemon answering
	restartCPU    time.Duration // the new daemon's CPU until it answered: the load moves it less
	rssRestarted  int64         // the new daemon's, settled
	rssSubmitted  int64         // after submit
	rssListed     int64         // after status --json
	rssIdle       int64         // settled after hold, release, cancel, retry
	// While trainers (true) run through the cards:
	rssBusy           int64 // the most sampled
	busyRunning       time.Duration
	busyJSON          time.Duration
	busyWhy, whyWorst time.Duration
	ran               int           // attempts that ended while busy
	took              time.Duration // median attempt of a true trainer, started to ended
	learned           time.Duration // the shape's learned duration
	rssClean          int64         // settled after cancel, clean --sweep
}

const (
	scaleCards   = "sim:4x24GiB"
	scalePlan    = "8" // slots on each card: 32 trainers at once
	waitSomeJobs = 64
	// busyFor is how long trainers run through the cards while the busy figures are taken.
	busyFor = 15 * time.Second
	// busyAsk is how often status and why are asked meanwhile.
	busyAsk = 500 * time.Millisecond
	// verbLimit bounds each verb, so that a binary much slower than the targets still
	// finishes the benchmark.
	verbLimit = 3 * time.Minute
)

// scaleBench is a state directory and the binary that runs its daemon.
type scaleBench struct {
	bin, state string
	daemon     *exec.Cmd
}

func (b *scaleBench) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = append(os.Environ(), "GPUQ_STATE_DIR="+b.state, "GPUQ_GPUS="+scaleCards, "GPUQ_SIM_LEDGER="+b.state+"-ledger")
	return cmd
}

// run runs a verb and returns how long it took and its stdout; exit status 1 (jobs
// that did not all succeed, for wait) is no error when ok1 is set.
func (b *scaleBench) run(ok1 bool, args ...string) (time.Duration, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), verbLimit)
	defer cancel()
	cmd := b.cmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	var exit *exec.ExitError
	if ok1 && errors.As(err, &exit) && exit.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return took, nil, fmt.Errorf("gpuq %s: %v: %s", strings.Join(args, " "), err, lastLine(stderr.String()))
	}
	return took, stdout.Bytes(), nil
}

// median runs a verb n times and returns the median time.
func (b *scaleBench) median(n int, args ...string) (time.Duration, error) {
	var ds []time.Duration
	for range n {
		d, _, err := b.run(false, args...)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return medianDuration(ds), nil
}

func (b *scaleBench) start() error {
	b.daemon = b.cmd(context.Background(), "daemon", "--gpu-plan", scalePlan)
	ask := func() *exec.Cmd { return b.cmd(context.Background(), "status", "--state", "running") }
	return startAnswering(b.daemon, b.state, b.state+".log", ask, verbLimit)
}

func (b *scaleBench) stop() {
	b.cmd(context.Background(), "daemon", "--stop", "--stop-trainers").Run()
	b.daemon.Wait()
}

func (b *scaleBench) rss() int64 { return rssOf(b.daemon.Process.Pid) }

// settledRSS is the daemon's RSS once it has been idle a while: what it keeps.
func (b *scaleBench) settledRSS() int64 {
	time.Sleep(3 * time.Second)
	return b.rss()
}

// scaleOptions say how the daemon at scale is measured.
type scaleOptions struct {
	jobs, runs int
	against    string // another binary, run alternately
	only       bool
}

// runScale measures the daemon at scale of the binary gpuq (and of sc.against,
// alternately) and prints the figures.
func runScale(w io.Writer, gpuq string, sc scaleOptions) error {
	if sc.jobs == 0 {
		return nil
	}
	if gpuq == "" {
		return errors.New("the daemon at scale needs a built binary: give -gpuq")
	}
	var runs, against []scaleFigures
	for range max(sc.runs, 1) {
		f, err := benchScale(gpuq, sc.jobs)
		if err != nil {
			return fmt.Errorf("daemon at scale: %w", err)
		}
		runs = append(runs, f)
		if sc.against != "" {
			if f, err = benchScale(sc.against, sc.jobs); err != nil {
				return fmt.Errorf("daemon at scale, %s: %w", sc.against, err)
			}
			against = append(against, f)
		}
	}
	printScale(w, runs, against)
	return nil
}

// benchScale runs the daemon of the binary bin with a sweep of n true trainers, on
// simulated cards: first drained, so that all n wait, for the verbs; then running
// through the cards, for the busy figures; then cancelled and cleaned.
func benchScale(bin string, n int) (f scaleFigures, err error) {
	f.jobs = n
	tmp, err := os.MkdirTemp("", "gpuq-scale-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(tmp)
	b := &scaleBench{bin: bin, state: filepath.Join(tmp, "state")}
	sweep := filepath.Join(tmp, "scale.yaml")
	doc := fmt.Sprintf("name: scale\ncommand: [true, \"{seed}\"]\nmatrix: {seed: [%s]}\nmemory: 1GiB\ngpu_plan: %q\n", seq(n), scalePlan)
	if err := os.WriteFile(sweep, []byte(doc), 0o644); err != nil {
		return f, err
	}
	if err := b.start(); err != nil {
		return f, err
	}
	defer func() { b.stop() }()
	if err := b.drain(true); err != nil {
		return f, err
	}
	if f.submit, _, err = b.run(false, "submit", sweep); err != nil {
		return f, err
	}
	f.rssSubmitted = b.settledRSS()
	if err := b.queued(&f); err != nil {
		return f, err
	}
	if err := b.busy(&f); err != nil {
		return f, err
	}
	if err := b.restart(&f); err != nil {
		return f, err
	}
	return f, b.clean(&f)
}

func (b *scaleBench) drain(on bool) error {
	verb := "drain"
	if !on {
		verb = "undrain"
	}
	for i := range 4 {
		if _, _, err := b.run(false, verb, fmt.Sprint(i)); err != nil {
			return err
		}
	}
	return nil
}

// queued takes the figures of the verbs while every job waits.
func (b *scaleBench) queued(f *scaleFigures) error {
	var err error
	if f.statusRunning, err = b.median(5, "status", "--state", "running"); err != nil {
		return err
	}
	var ds []time.Duration
	for range 3 {
		d, out, err := b.run(false, "status", "--json")
		if err != nil {
			return err
		}
		var list struct{ Jobs []json.RawMessage }
		if err := json.Unmarshal(out, &list); err != nil || len(list.Jobs) != f.jobs {
			return fmt.Errorf("status --json listed %d jobs of %d (%v)", len(list.Jobs), f.jobs, err)
		}
		ds, f.jsonBytes = append(ds, d), len(out)
	}
	f.statusJSON, f.rssListed = medianDuration(ds), b.rss()
	last := fmt.Sprintf("scale.%d", f.jobs)
	if f.why, err = b.median(5, "why", last); err != nil {
		return err
	}
	for _, step := range []struct {
		to   *time.Duration
		args []string
		ok1  bool
	}{
		{&f.hold, []string{"hold", "--sweep", "scale"}, false},
		{&f.release, []string{"release", "--sweep", "scale"}, false},
		{&f.cancel, []string{"cancel", "--sweep", "scale"}, false},
		{&f.waitAll, []string{"wait", "--sweep", "scale"}, true},
		{&f.waitSome, append([]string{"wait"}, someIDs(f.jobs)...), true},
		{&f.retry, []string{"retry", "--sweep", "scale"}, false},
	} {
		if *step.to, _, err = b.run(step.ok1, step.args...); err != nil {
			return err
		}
	}
	f.rssIdle = b.settledRSS()
	return nil
}

// someIDs are waitSomeJobs jobs spread over the sweep.
func someIDs(n int) []string {
	var ids []string
	for i := 1; i <= waitSomeJobs; i++ {
		ids = append(ids, fmt.Sprintf("scale.%d", max(1, i*n/waitSomeJobs)))
	}
	return slices.Compact(ids)
}

// restart drains the cards, stops the daemon (daemon --stop, which leaves a snapshot of
// every job for the next to read) and times a new one until it answers; then kills
// that one, times another the same way, and reads what it keeps, idle.
func (b *scaleBench) restart(f *scaleFigures) error {
	if err := b.drain(true); err != nil {
		return err
	}
	b.stop()
	began := time.Now()
	if err := b.start(); err != nil {
		return err
	}
	f.restartClean = time.Since(began)
	b.daemon.Process.Signal(syscall.SIGKILL)
	b.daemon.Wait()
	began = time.Now()
	if err := b.start(); err != nil {
		return err
	}
	f.restart = time.Since(began)
	f.restartCPU, _ = cpuOf(b.daemon.Process.Pid) // 0 where it cannot be read
	f.rssRestarted = b.settledRSS()
	return nil
}

// busy lets the trainers run through the cards for busyFor and takes the figures
// meanwhile.
func (b *scaleBench) busy(f *scaleFigures) error {
	if err := b.drain(false); err != nil {
		return err
	}
	stop := make(chan struct{})
	most := make(chan int64)
	go func() {
		var m int64
		for {
			m = max(m, b.rss())
			select {
			case <-stop:
				most <- m
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	until := time.Now().Add(busyFor)
	var running, whys []time.Duration
	var err error
	// Asked at a pace of their own, not as fast as answered: a daemon that answers
	// sooner is not asked more, and runs as many trainers meanwhile.
	for next := time.Now(); next.Before(until) && err == nil; next = next.Add(busyAsk) {
		time.Sleep(time.Until(next))
		var d time.Duration
		if d, _, err = b.run(false, "status", "--state", "running"); err == nil {
			running = append(running, d)
			d, _, err = b.run(false, "why", fmt.Sprintf("scale.%d", f.jobs))
			whys = append(whys, d)
		}
	}
	if err == nil {
		f.busyJSON, _, err = b.run(false, "status", "--json")
	}
	close(stop)
	f.rssBusy = <-most
	if err != nil {
		return err
	}
	f.busyRunning, f.busyWhy = medianDuration(running), medianDuration(whys)
	f.whyWorst = slices.Max(whys)
	return b.took(f)
}

// took reads how long the true trainers that ended took, as the daemon recorded them.
func (b *scaleBench) took(f *scaleFigures) error {
	_, out, err := b.run(false, "status", "--json", "--state", "succeeded")
	if err != nil {
		return err
	}
	var list struct {
		Jobs []struct {
			Learned  *float64 `json:"learned_duration_s"`
			Attempts []struct{ Started, Ended time.Time }
		}
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return err
	}
	var took []time.Duration
	for _, j := range list.Jobs {
		for _, a := range j.Attempts {
			took = append(took, a.Ended.Sub(a.Started))
		}
		if j.Learned != nil {
			f.learned = time.Duration(*j.Learned * float64(time.Second))
		}
	}
	f.ran, f.took = len(took), medianDuration(took)
	return nil
}

// clean cancels the sweep, waits for its jobs to end, forgets it, and reads what the
// daemon keeps then.
func (b *scaleBench) clean(f *scaleFigures) error {
	for _, args := range [][]string{{"cancel", "--sweep", "scale"}, {"wait", "--sweep", "scale"}, {"clean", "--sweep", "scale", "--logs"}} {
		if _, _, err := b.run(true, args...); err != nil {
			return err
		}
	}
	f.rssClean = b.settledRSS()
	return nil
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// scaleFigure is one figure of benchScale: how it reads from a run, its target (0:
// none, reported only), and whether it is a size.
type scaleFigure struct {
	name   string
	of     func(scaleFigures) float64
	target float64
	bytes  bool
}

var scaleTable = []scaleFigure{
	{"submit of the sweep", secs(func(f scaleFigures) time.Duration { return f.submit }), 2, false},
	{"status --state running (none runs)", secs(func(f scaleFigures) time.Duration { return f.statusRunning }), 0.1, false},
	{"status --json of every job", secs(func(f scaleFigures) time.Duration { return f.statusJSON }), 1, false},
	{"  its size", func(f scaleFigures) float64 { return float64(f.jsonBytes) }, 0, true},
	{"why of the last job", secs(func(f scaleFigures) time.Duration { return f.why }), 0, false},
	{"hold --sweep", secs(func(f scaleFigures) time.Duration { return f.hold }), 1, false},
	{"release --sweep", secs(func(f scaleFigures) time.Duration { return f.release }), 1, false},
	{"cancel --sweep", secs(func(f scaleFigures) time.Duration { return f.cancel }), 1, false},
	{"wait --sweep (every job ended)", secs(func(f scaleFigures) time.Duration { return f.waitAll }), 1, false},
	{fmt.Sprintf("wait of %d jobs (ended)", waitSomeJobs), secs(func(f scaleFigures) time.Duration { return f.waitSome }), 1, false},
	{"retry --sweep", secs(func(f scaleFigures) time.Duration { return f.retry }), 1, false},
	{"daemon RSS after submit", rss(func(f scaleFigures) int64 { return f.rssSubmitted }), 250 << 20, true},
	{"daemon RSS after status --json", rss(func(f scaleFigures) int64 { return f.rssListed }), 0, true},
	{"daemon RSS idle, after the verbs", rss(func(f scaleFigures) int64 { return f.rssIdle }), 250 << 20, true},
	{"daemon RSS busy (most)", rss(func(f scaleFigures) int64 { return f.rssBusy }), 300 << 20, true},
	{"status --state running, busy", secs(func(f scaleFigures) time.Duration { return f.busyRunning }), 0.1, false},
	{"status --json of every job, busy", secs(func(f scaleFigures) time.Duration { return f.busyJSON }), 0, false},
	{"why, busy (median)", secs(func(f scaleFigures) time.Duration { return f.busyWhy }), 0, false},
	{"why, busy (worst)", secs(func(f scaleFigures) time.Duration { return f.whyWorst }), 1, false},
	{"true trainers run while busy", func(f scaleFigures) float64 { return float64(f.ran) }, 0, false},
	{"  a true trainer's recorded time (median)", secs(func(f scaleFigures) time.Duration { return f.took }), 0, false},
	{"  its shape's learned duration", secs(func(f scaleFigures) time.Duration { return f.learned }), 1, false},
	{"restart after daemon --stop (the cards drained)", secs(func(f scaleFigures) time.Duration { return f.restartClean }), 1, false},
	{"restart after kill -9 (the cards drained)", secs(func(f scaleFigures) time.Duration { return f.restart }), 1, false},
	{"  the new daemon's CPU until it answered", secs(func(f scaleFigures) time.Duration { return f.restartCPU }), 0, false},
	{"  daemon RSS idle after it", rss(func(f scaleFigures) int64 { return f.rssRestarted }), 250 << 20, true},
	{"daemon RSS after clean --sweep", rss(func(f scaleFigures) int64 { return f.rssClean }), 100 << 20, true},
}

func secs(of func(scaleFigures) time.Duration) func(scaleFigures) float64 {
	return func(f scaleFigures) float64 { return of(f).Seconds() }
}

func rss(of func(scaleFigures) int64) func(scaleFigures) float64 {
	return func(f scaleFigures) float64 { return float64(of(f)) }
}

// printScale prints each figure's median over runs beside its target; with against
// (runs of another binary, alternated with these), that binary's median too, and the
// ratio of the two, which says more than either where machines differ.
func printScale(w io.Writer, runs, against []scaleFigures) {
	fmt.Fprintf(w, "\nDaemon at scale (the gpuq binary, %d true trainers queued on %s, plan %s; medians of %d runs)\n\n",
		runs[0].jobs, scaleCards, scalePlan, len(runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "figure\tthis\ttarget\t\t"
	if len(against) > 0 {
		header = "figure\tthis\tother\tthis/other\ttarget\t\t"
	}
	fmt.Fprintln(tw, header)
	for _, fig := range scaleTable {
		this := medianOf(runs, fig.of)
		row := fig.name + "\t" + fig.format(this) + "\t"
		if len(against) > 0 {
			other := medianOf(against, fig.of)
			ratio := "-"
			if other > 0 {
				ratio = fmt.Sprintf("%.2f", this/other)
			}
			row += fig.format(other) + "\t" + ratio + "\t"
		}
		mark := ""
		target := "-"
		if fig.target > 0 {
			target = "≤ " + fig.format(fig.target)
			mark = "MET"
			if this > fig.target {
				mark = "NOT MET"
			}
		}
		fmt.Fprintln(tw, row+target+"\t"+mark+"\t")
	}
	tw.Flush()
}

func (fig scaleFigure) format(v float64) string {
	switch {
	case fig.bytes:
		return plans.FormatSize(int64(v))
	case strings.Contains(fig.name, "trainers run"):
		return fmt.Sprintf("%.0f", v)
	case v < 1:
		return fmt.Sprintf("%.0f ms", v*1000)
	}
	return fmt.Sprintf("%.2f s", v)
}
