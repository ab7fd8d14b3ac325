package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Dispatch: how many trainers the daemon starts and reaps in a second, measured on the
// real binary with trainers that do nothing (true) on simulated cards, so that what is
// measured is gpuq's own cost per job: the daemon's, and its supervisors'. Three
// machines: the daemon's own cards; the same with thousands of unrelated processes on
// the machine (a GPU node shared with data loaders, notebooks, other users); and a
// daemon with no cards of its own and many workers linked, all on this machine.

// dispatchOptions say what to measure.
type dispatchOptions struct {
	jobs     int    // true trainers a run starts (0: not measured)
	runs     int    // runs of each case; figures are their medians
	against  string // another gpuq binary, run alternately, for ratios
	only     bool   // measure dispatch alone
	crowd    int    // unrelated processes on the machine in the crowded case
	workers  int    // workers linked in the workers' case
	idleSecs int    // how long the idle workers are watched
	// gpus are the daemon's own cards (its --gpus): simulated, or "all", a machine's
	// real ones, to weigh what reading NVML each round costs. Workers' are simulated.
	gpus string
}

// The targets of the issue this was built for, on a 2-core machine.
const (
	targetRate        = 150.0 // trainers per second
	targetCrowdedRate = 0.8 * targetRate
	targetDaemonMs    = 0.5 // the daemon's CPU per job with workers, ms
	// targetIdleWorker is what an idle worker may cost: "about nothing", taken as 0.1%
	// of a core each.
	targetIdleWorker = 0.001
)

// dispatchCase is one machine a run measures.
type dispatchCase struct {
	name    string
	crowd   int // unrelated processes started first
	workers int // workers linked to a daemon with no cards
}

// dispatchFigures are one run of one case.
type dispatchFigures struct {
	rate float64 // trainers started and reaped per second
	// daemonMs is the daemon's CPU per job; restMs the supervisors', trainers' and
	// workers' together; in milliseconds.
	daemonMs, restMs float64
	// idleWorkers is the CPU the idle workers took together, in cores (workers' case).
	idleWorkers float64
}

// simulatedNotice is the line of a daemon's log that says its cards are simulated (as
// it does when --gpus all finds no NVIDIA driver), or "".
func simulatedNotice(log string) string {
	b, _ := os.ReadFile(log)
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "SIMULATED") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// checkCards says what is wrong with -dispatch-gpus, if anything.
func (o dispatchOptions) checkCards() error {
	if strings.EqualFold(strings.TrimSpace(o.gpus), "none") {
		return errors.New("-dispatch-gpus none: the dispatch daemon needs cards of its own (the workers' case has a daemon without)")
	}
	if _, err := plans.ParseGPUs(o.gpus); err != nil {
		return fmt.Errorf("-dispatch-gpus %s: %w", o.gpus, err)
	}
	return nil
}

// simulated says whether the daemon's own cards are simulated ones (see checkCards).
func (o dispatchOptions) simulated() bool {
	spec, err := plans.ParseGPUs(o.gpus)
	return err == nil && spec.IsSimulated()
}

// cardsWords says which cards the daemon's own are.
func (o dispatchOptions) cardsWords() string {
	if o.simulated() {
		return "simulated cards"
	}
	return fmt.Sprintf("the machine's cards (--gpus %s; workers' simulated)", o.gpus)
}

func (o dispatchOptions) cases() []dispatchCase {
	return []dispatchCase{
		{name: "own cards"},
		{name: fmt.Sprintf("own cards, %d other processes", o.crowd), crowd: o.crowd},
		{name: fmt.Sprintf("%d workers, no cards of its own", o.workers), workers: o.workers},
	}
}

// runDispatch measures every case, runs times, for gpuq (and alternately against),
// and prints each figure's median beside its target.
func runDispatch(w io.Writer, gpuq string, o dispatchOptions) error {
	if o.jobs <= 0 {
		return nil
	}
	if err := o.checkCards(); err != nil {
		return err
	}
	bins := []string{gpuq}
	if o.against != "" {
		bins = append(bins, o.against)
	}
	cases := o.cases()
	dirs, err := newRunDirs()
	if err != nil {
		return err
	}
	defer dirs.removeAll()
	// figs[case][binary] holds each run's figures.
	figs := make([][][]dispatchFigures, len(cases))
	for i := range figs {
		figs[i] = make([][]dispatchFigures, len(bins))
	}
	for range o.runs {
		for i, c := range cases {
			for b, bin := range bins {
				f, err := benchDispatch(bin, c, o, dirs)
				if err != nil {
					return fmt.Errorf("dispatch, %s, %s: %w", c.name, bin, err)
				}
				figs[i][b] = append(figs[i][b], f)
			}
		}
	}
	printDispatch(w, o, cases, figs)
	return nil
}

func printDispatch(w io.Writer, o dispatchOptions, cases []dispatchCase, figs [][][]dispatchFigures) {
	fmt.Fprintf(w, "\nDispatch: %d true trainers on %s, started and reaped (the gpuq binary; medians of %d runs", o.jobs, o.cardsWords(), o.runs)
	if o.against != "" {
		fmt.Fprintf(w, ",\nalternated with %s's; ratio: this binary's over it", o.against)
	}
	fmt.Fprintf(w, ")\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "machine\tfigure\tthis\tagainst\tratio\ttarget\t\t")
	row := func(c dispatchCase, fig string, runs [][]dispatchFigures, of func(dispatchFigures) float64, format, target string, met func(float64) bool) {
		this := medianOf(runs[0], of)
		cells := []string{fmt.Sprintf(format, this), "", ""}
		if len(runs) > 1 {
			other := medianOf(runs[1], of)
			cells[1] = fmt.Sprintf(format, other)
			if other > 0 {
				cells[2] = fmt.Sprintf("%.2f", this/other)
			}
		}
		mark := ""
		if met != nil {
			mark = "NOT MET"
			if met(this) {
				mark = "MET"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.name, fig, cells[0], cells[1], cells[2], target, mark)
	}
	for i, c := range cases {
		runs := figs[i]
		switch {
		case c.workers > 0:
			row(c, "jobs/s", runs, func(f dispatchFigures) float64 { return f.rate }, "%.1f",
				fmt.Sprintf(">= %.0f", targetRate), func(v float64) bool { return v >= targetRate })
			row(c, "daemon CPU/job", runs, func(f dispatchFigures) float64 { return f.daemonMs }, "%.2f ms",
				fmt.Sprintf("<= %.1f ms", targetDaemonMs), func(v float64) bool { return v <= targetDaemonMs })
			row(c, "workers' CPU/job", runs, func(f dispatchFigures) float64 { return f.restMs }, "%.2f ms", "", nil)
			row(c, "idle, each worker", runs, func(f dispatchFigures) float64 { return 100 * f.idleWorkers / float64(c.workers) }, "%.3f%% of a core",
				fmt.Sprintf("<= %.1f%%", 100*targetIdleWorker), func(v float64) bool { return v <= 100*targetIdleWorker })
		default:
			target := targetRate
			if c.crowd > 0 {
				target = targetCrowdedRate
			}
			row(c, "trainers/s", runs, func(f dispatchFigures) float64 { return f.rate }, "%.1f",
				fmt.Sprintf(">= %.0f", target), func(v float64) bool { return v >= target })
			row(c, "daemon CPU/job", runs, func(f dispatchFigures) float64 { return f.daemonMs }, "%.2f ms", "", nil)
			row(c, "supervisor+trainer CPU/job", runs, func(f dispatchFigures) float64 { return f.restMs }, "%.2f ms", "", nil)
		}
		// What 2 idle cores would sustain at this CPU per job: the machine is shared.
		row(c, "2 cores / CPU per job", runs, func(f dispatchFigures) float64 { return 2000 / (f.daemonMs + f.restMs) }, "%.0f/s", "", nil)
	}
	tw.Flush()
}

// medianOf is the median of one figure over runs.
func medianOf[F any](runs []F, of func(F) float64) float64 {
	xs := make([]float64, len(runs))
	for i, f := range runs {
		xs[i] = of(f)
	}
	return median(xs)
}

// runDirs are the directories of a measurement's runs, one each, all under one that
// is removed once every run is done, not each after its run: a run made about 4,000
// files, and removing them just before the next run made every file that run created
// dearer on a filesystem that looks past recently freed inodes for a new one (ext4
// without a journal), a cost of the bench, not of gpuq (measured: a fifth fewer
// trainers a second).
type runDirs struct{ root string }

func newRunDirs() (runDirs, error) {
	root, err := os.MkdirTemp("", "gpuq-dispatch-")
	return runDirs{root: root}, err
}

// next makes the directory of the next run.
func (d runDirs) next() (string, error) { return os.MkdirTemp(d.root, "run-") }

func (d runDirs) removeAll() { os.RemoveAll(d.root) }

// benchDispatch runs one case once with the binary bin, in a directory of dirs.
func benchDispatch(bin string, c dispatchCase, o dispatchOptions, dirs runDirs) (dispatchFigures, error) {
	var f dispatchFigures
	tmp, err := dirs.next()
	if err != nil {
		return f, err
	}
	if c.crowd > 0 {
		stop, err := startCrowd(c.crowd)
		if err != nil {
			return f, err
		}
		defer stop()
	}
	d := dispatchDaemon{bin: bin, state: filepath.Join(tmp, "state")}
	args := []string{"daemon", "--gpus", o.gpus, "--gpu-plan", "16"}
	if c.workers > 0 {
		args = []string{"daemon", "--gpus", "none", "--listen", "127.0.0.1:0"}
	}
	if err := d.start(args...); err != nil {
		return f, err
	}
	defer d.stop()
	if c.workers == 0 && !o.simulated() {
		if notice := simulatedNotice(d.log); notice != "" {
			return f, fmt.Errorf("-dispatch-gpus %s: the daemon simulates its cards, measured they would not be the machine's: %s", o.gpus, notice)
		}
	}
	var workers []*exec.Cmd
	if c.workers > 0 {
		if workers, err = d.startWorkers(c.workers); err != nil {
			return f, err
		}
		defer stopWorkers(workers)
		if f.idleWorkers, err = idleCPU(workers, time.Duration(o.idleSecs)*time.Second); err != nil {
			return f, err
		}
	}
	sweep := filepath.Join(tmp, "dispatch.yaml")
	doc := fmt.Sprintf("name: dispatch\ncommand: [\"true\"]\nmatrix: {seed: [%s]}\nmemory: 1GiB\n", seq(o.jobs))
	if err := os.WriteFile(sweep, []byte(doc), 0o644); err != nil {
		return f, err
	}
	daemonBefore, err := cpuOf(d.cmd.Process.Pid)
	if err != nil {
		return f, err
	}
	restBefore := childCPUOf(d.cmd.Process.Pid) + workersCPU(workers)
	began := time.Now()
	if out, err := d.gpuq("submit", sweep).CombinedOutput(); err != nil {
		return f, fmt.Errorf("submit: %v: %s", err, out)
	}
	if err := d.waitEnded(o.jobs, 10*time.Minute); err != nil {
		return f, err
	}
	took := time.Since(began)
	daemonAfter, err := cpuOf(d.cmd.Process.Pid)
	if err != nil {
		return f, err
	}
	rest := childCPUOf(d.cmd.Process.Pid) + workersCPU(workers) - restBefore
	f.rate = float64(o.jobs) / took.Seconds()
	f.daemonMs = (daemonAfter - daemonBefore).Seconds() * 1000 / float64(o.jobs)
	f.restMs = rest.Seconds() * 1000 / float64(o.jobs)
	return f, nil
}

// dispatchDaemon is a daemon of the binary bin on the state directory state.
type dispatchDaemon struct {
	bin, state string
	cmd        *exec.Cmd
	log        string
	// read is how much of the log has been counted; ended how many ends it holds.
	read  int64
	ended int
}

func (d *dispatchDaemon) gpuq(args ...string) *exec.Cmd {
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), "GPUQ_STATE_DIR="+d.state, "GPUQ_SIM_LEDGER="+d.state+"-ledger")
	return cmd
}

func (d *dispatchDaemon) start(args ...string) error {
	d.cmd, d.log = d.gpuq(args...), d.state+".log"
	return startAnswering(d.cmd, d.state, d.log, func() *exec.Cmd { return d.gpuq("status", "--state", "running") }, time.Minute)
}

func (d *dispatchDaemon) stop() {
	d.gpuq("daemon", "--stop", "--stop-trainers").Run()
	d.cmd.Wait()
}

// waitEnded waits until the daemon's log tells of n jobs that succeeded; a job that
// failed is an error.
func (d *dispatchDaemon) waitEnded(n int, within time.Duration) error {
	for deadline := time.Now().Add(within); d.ended < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs ended within %s", d.ended, n, within)
		}
		if err := d.count(); err != nil {
			return err
		}
	}
	return nil
}

// count reads what the log has gained since it was last read.
func (d *dispatchDaemon) count() error {
	f, err := os.Open(d.log)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(d.read, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	// Whole lines only: the rest is read again next time.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	d.read += int64(len(data))
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.Contains(line, " succeeded: "):
			d.ended++
		case strings.Contains(line, " failed: "), strings.Contains(line, " lost: "):
			return fmt.Errorf("a job did not succeed: %s", strings.TrimSpace(line))
		}
	}
	return nil
}

// startWorkers starts n workers of one simulated card each (16 slots), linked to the
// daemon, and returns once the daemon has said that each connected.
func (d *dispatchDaemon) startWorkers(n int) ([]*exec.Cmd, error) {
	var addr []byte
	for deadline := time.Now().Add(time.Minute); len(addr) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, errors.New("the daemon wrote no listen address")
		}
		addr, _ = os.ReadFile(filepath.Join(d.state, "listen"))
	}
	var out []*exec.Cmd
	for i := range n {
		name := fmt.Sprintf("w%d", i)
		cmd := d.gpuq("worker", "--server", strings.TrimSpace(string(addr)), "--name", name, "--gpus", "sim:1x24GiB", "--gpu-plan", "16")
		cmd.Env = append(cmd.Env, "GPUQ_SIM_LEDGER="+filepath.Join(d.state, "ledger-"+name))
		if err := cmd.Start(); err != nil {
			stopWorkers(out)
			return nil, err
		}
		out = append(out, cmd)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		log, _ := os.ReadFile(d.log)
		if linked := bytes.Count(log, []byte(") connected: ")); linked >= n {
			d.read = int64(len(log))
			return out, nil
		} else if time.Now().After(deadline) {
			stopWorkers(out)
			return nil, fmt.Errorf("%d of %d workers linked", linked, n)
		}
	}
}

func stopWorkers(ws []*exec.Cmd) {
	for _, w := range ws {
		w.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range ws {
		w.Wait()
	}
}

// idleCPU is the CPU the workers take together while nothing runs, in cores, watched
// for d once they have settled.
func idleCPU(ws []*exec.Cmd, d time.Duration) (float64, error) {
	time.Sleep(2 * time.Second)
	before, began := workersCPU(ws), time.Now()
	time.Sleep(d)
	return (workersCPU(ws) - before).Seconds() / time.Since(began).Seconds(), nil
}

// workersCPU is the CPU the workers and their children have taken.
func workersCPU(ws []*exec.Cmd) time.Duration {
	var sum time.Duration
	for _, w := range ws {
		if c, err := cpuOf(w.Process.Pid); err == nil {
			sum += c + childCPUOf(w.Process.Pid)
		}
	}
	return sum
}

// startCrowd starts n processes that sleep, unrelated to gpuq, and returns once they
// run, with what stops them.
func startCrowd(n int) (stop func(), err error) {
	cmd := exec.Command("sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 3600 & i=$((i+1)); done; echo started; wait", n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
		stop()
		return nil, fmt.Errorf("the crowd of %d processes did not start: %q %v", n, line, err)
	}
	return stop, nil
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuOf is the CPU a process has taken itself.
func cpuOf(pid int) (time.Duration, error) {
	f, err := statTimes(pid)
	if err != nil {
		return 0, err
	}
	return time.Duration(f[0]+f[1]) * clockTick, nil
}

// childCPUOf is the CPU of the children a process has waited for (theirs included).
func childCPUOf(pid int) time.Duration {
	f, err := statTimes(pid)
	if err != nil {
		return 0
	}
	return time.Duration(f[2]+f[3]) * clockTick
}

// statTimes reads utime, stime, cutime and cstime from /proc/PID/stat.
func statTimes(pid int) ([4]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return [4]int64{}, err
	}
	return parseStatTimes(data)
}

// parseStatTimes reads utime, stime, cutime and cstime from a line of /proc/PID/stat:
// its 14th to 17th fields, counted after the command name, which is in parentheses and
// may hold spaces and parentheses itself.
func parseStatTimes(data []byte) ([4]int64, error) {
	var out [4]int64
	// Fields after the command name: state is the first.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 15 {
		return out, fmt.Errorf("not a line of /proc/PID/stat: %q", data)
	}
	for i := range out {
		var err error
		if out[i], err = strconv.ParseInt(f[11+i], 10, 64); err != nil {
			return out, err
		}
	}
	return out, nil
}
