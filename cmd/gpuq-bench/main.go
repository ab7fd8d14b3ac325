// Command gpuq-bench prints gpuq's benchmark table (make bench): every trace of
// examples/traces simulated under each policy (gpuq's by the built binary, as a user
// runs it, with its peak RSS), with gpuq's makespan before ordering and backfilling
// (baseline.tsv) beside it; the packer's Go benchmarks; the daemon's memory and latency,
// and the daemon at scale (scale.go); each time the median of several runs; trainers
// dispatched a second (dispatch.go); a fleet beyond one box (1,000 workers of 8 cards,
// 1,000,000 queued jobs), its scheduling rounds timed and, past the target, halved
// until they are under it (where it breaks first); then the targets, met or not.
//
//	go test -run '^$' -bench 'Pack|Place' -count 5 ./scheduler/pack/ > packer.txt
//	go run ./cmd/gpuq-bench -packer packer.txt -gpuq bin/gpuq
//	go run ./cmd/gpuq-bench -scale-only -gpuq bin/gpuq -against old/gpuq -scale-runs 3
//	go run ./cmd/gpuq-bench -fleet-only   # the fleet alone
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/simulate"
)

func main() {
	traces := flag.String("traces", "examples/traces", "directory of traces to simulate")
	runs := flag.Int("runs", 3, "runs of each simulation; wall times are their median")
	packer := flag.String("packer", "", "output of go test -bench 'Pack|Place' to summarise")
	gpuq := flag.String("gpuq", "", "a built gpuq binary, to run gpuq's simulations and measure its daemon")
	var sc scaleOptions
	flag.IntVar(&sc.jobs, "scale", 100000, "jobs queued for the daemon-at-scale figures (0: not measured)")
	flag.IntVar(&sc.runs, "scale-runs", 1, "runs of the daemon at scale; each figure is their median")
	flag.StringVar(&sc.against, "against", "", "another gpuq binary whose daemon at scale runs alternated with -gpuq's, for ratios")
	flag.BoolVar(&sc.only, "scale-only", false, "measure the daemon at scale alone")
	fleet := flag.String("fleet", "1000,8,1000000,0", "workers,cards per worker,queued jobs,rounds timed of the fleet beyond one box (rounds 0: every round until no job waits); \"\": skip it")
	fleetOnly := flag.Bool("fleet-only", false, "simulate the fleet alone, with its targets")
	do := dispatchOptions{crowd: 2000, workers: 50, idleSecs: 5}
	flag.IntVar(&do.jobs, "dispatch", 400, "true trainers each dispatch run starts (0: dispatch not measured)")
	flag.IntVar(&do.runs, "dispatch-runs", 3, "runs of each dispatch case; each figure is their median")
	flag.StringVar(&do.against, "dispatch-against", "", "another gpuq binary whose dispatch runs alternate with -gpuq's, for ratios")
	flag.BoolVar(&do.only, "dispatch-only", false, "measure dispatch alone")
	flag.StringVar(&do.gpus, "dispatch-gpus", "sim:8x24GiB", "the dispatch daemon's own cards: simulated, or all, the machine's real ones (an NVIDIA driver's)")
	flag.Parse()
	var err error
	switch {
	case sc.only:
		err = runScale(os.Stdout, *gpuq, sc)
	case *fleetOnly:
		var checks bytes.Buffer
		if err = benchFleet(os.Stdout, *fleet, checker(&checks)); err == nil {
			fmt.Printf("\nTargets\n%s", checks.Bytes())
		}
	case do.only:
		err = runDispatch(os.Stdout, *gpuq, do)
	default:
		err = run(os.Stdout, *traces, *runs, *packer, *gpuq, *fleet, do, sc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuq-bench:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, traceDir string, runs int, packerOut, gpuq, fleet string, do dispatchOptions, sc scaleOptions) error {
	files, err := filepath.Glob(filepath.Join(traceDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no traces in %s", traceDir)
	}
	before, err := readBaseline(baseline)
	if err != nil {
		return err
	}
	var results []simResult
	facts := map[string]computeFacts{}
	for _, f := range files {
		rs, err := simulateTrace(f, runs, gpuq)
		if err != nil {
			return err
		}
		for i := range rs {
			if rs[i].Policy == simulate.GPUQ {
				rs[i].before = before.ratio(f, rs[i].trace)
			}
		}
		results = append(results, rs...)
		if facts[rs[0].trace], err = computeOf(f, rs[0].trace); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "Simulations (virtual time; sim wall is the median of %d runs, trace loading included;\n", runs)
	fmt.Fprintf(w, "before: gpuq's makespan over the bound before it ordered jobs largest first and backfilled)\n\n")
	printSims(w, results)
	stops, err := earlyStopping(files, gpuq)
	if err != nil {
		return err
	}
	if len(stops) > 0 {
		fmt.Fprintf(w, "\nEarly stopping (virtual time): gpuq's makespan with each trace's early_stop, and with every job\n")
		fmt.Fprintf(w, "run to its end (--no-early-stop); whether each group's best point, by its curve, finished\n\n")
		printEarlyStopping(w, stops)
	}

	var packs []packResult
	if packerOut != "" {
		if packs, err = readPacker(packerOut); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nPacker, one decision (Go benchmarks; medians of each -count run)\n")
		fmt.Fprintf(w, "Pack explains every waiting job (gpuq plan); Place is the engine's decision in a round.\n\n")
		printPacker(w, packs)
	}
	if gpuq == "" {
		fmt.Fprintln(w, "\nDaemon: not measured (give -gpuq, a built binary)")
	} else {
		f, err := benchDaemon(gpuq, 10000, 100)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		printDaemon(w, f)
		if err := runScale(w, gpuq, sc); err != nil {
			return err
		}
		if err := runDispatch(w, gpuq, do); err != nil {
			return err
		}
	}
	printSharingModel(w)
	if h := facts["gla-shared"].hand; h > 0 {
		fmt.Fprintf(w, "  gla-shared under the hand plan %s (gpuq simulate --gpu-plan %s): makespan %s\n", handPlan, handPlan, simulate.Hours(h))
	}
	// The fleet's section prints its targets beside its figures: they are measured
	// last, as the others are printed.
	var fleetChecks bytes.Buffer
	if fleet != "" {
		if err := benchFleet(w, fleet, checker(&fleetChecks)); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nTargets")
	if err := printTargets(w, results, packs, stops, facts); err != nil {
		return err
	}
	_, err = w.Write(fleetChecks.Bytes())
	return err
}

// checker prints whether each target is met, one a line.
func checker(w io.Writer) func(ok bool, format string, args ...any) {
	return func(ok bool, format string, args ...any) {
		mark := "MET    "
		if !ok {
			mark = "NOT MET"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, fmt.Sprintf(format, args...))
	}
}

type simResult struct {
	trace string
	sha   string // of the trace file
	simulate.Result
	cards string
	unfit int // jobs that fit at no rung
	// before is gpuq's makespan over the bound before ordering and backfilling (0:
	// not known); rss the most memory gpuq simulate held (0: not measured).
	before float64
	rss    int64
}

// simulateTrace runs one trace under every policy, runs times each: gpuq's by the binary
// gpuq, if given, as gpuq simulate, to measure what a user waits for and its memory.
// Virtual-time results are deterministic; runs differing would be a bug, and is
// reported as one.
func simulateTrace(file string, runs int, gpuq string) ([]simResult, error) {
	t, err := simulate.Load(file, plans.Overrides{})
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	var out []simResult
	for _, p := range simulate.Policies {
		var walls []float64
		res := simResult{trace: strings.TrimSuffix(filepath.Base(file), ".yaml"), sha: hex.EncodeToString(sum[:]), cards: t.Sweep.GPUs.String(), unfit: len(simulate.Unfit(t))}
		for i := range runs {
			began := time.Now()
			var r simulate.Result
			var rss int64
			if p == simulate.GPUQ && gpuq != "" {
				r, rss, err = simulateBy(gpuq, file)
			} else {
				var t *simulate.Trace
				if t, err = simulate.Load(file, plans.Overrides{}); err == nil {
					r, err = simulate.Run(t, p)
				}
			}
			if err != nil {
				return nil, err
			}
			walls = append(walls, time.Since(began).Seconds())
			if i > 0 && (r.Makespan != res.Makespan || r.Completed != res.Completed) {
				return nil, fmt.Errorf("%s, policy %s: run %d differs from run 1", file, p, i+1)
			}
			res.Result, res.rss = r, max(res.rss, rss)
		}
		res.SimWall = median(walls)
		out = append(out, res)
	}
	return out, nil
}

// simulateBy runs gpuq simulate FILE --policy gpuq --json with args, and returns its
// result and the most memory it held.
func simulateBy(gpuq, file string, args ...string) (simulate.Result, int64, error) {
	var r simulate.Result
	cmd := exec.Command(gpuq, append([]string{"simulate", file, "--policy", string(simulate.GPUQ), "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return r, 0, fmt.Errorf("%s simulate %s: %v: %s", gpuq, file, err, stderr.String())
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, 0, fmt.Errorf("%s simulate %s: %v", gpuq, file, err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10 // KiB on Linux
	}
	return r, rss, nil
}

//go:embed baseline.tsv
var baseline []byte

// baselines are gpuq's makespans before ordering and backfilling, by trace.
type baselines map[string]struct {
	sha                string
	makespan, lowBound float64
}

func readBaseline(data []byte) (baselines, error) {
	out := baselines{}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("baseline: %q: want trace, sha256, makespan_s, lower_bound_s", line)
		}
		m, err1 := strconv.ParseFloat(f[2], 64)
		b, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || b <= 0 {
			return nil, fmt.Errorf("baseline: %q: want numbers", line)
		}
		out[f[0]] = struct {
			sha                string
			makespan, lowBound float64
		}{f[1], m, b}
	}
	return out, nil
}

// ratio is a trace's makespan over its bound before, or 0 when the baseline does not
// have it or the trace has changed since.
func (bs baselines) ratio(file, trace string) float64 {
	b, ok := bs[trace]
	data, err := os.ReadFile(file)
	if !ok || err != nil {
		return 0
	}
	sum := sha256.Sum256(data)
	if !strings.HasPrefix(hex.EncodeToString(sum[:]), b.sha) {
		return 0
	}
	return b.makespan / b.lowBound
}

func printSims(w io.Writer, results []simResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "trace\tcards\tjobs\tpolicy\tmakespan\tbound\tx bound\tbefore\tcompleted\tfailed\tOOMs\tattempts\tmem used\tsim wall\tpeak RSS\t")
	for _, r := range results {
		before, rss := "", ""
		if r.before > 0 {
			before = fmt.Sprintf("%.2f", r.before)
		}
		if r.rss > 0 {
			rss = fmt.Sprintf("%d MB", r.rss>>20)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.2f\t%s\t%d\t%d\t%d\t%d\t%.0f%%\t%.2fs\t%s\t\n", r.trace, r.cards, r.Jobs, r.Policy,
			simulate.Hours(r.Makespan), simulate.Hours(r.LowerBound), r.Ratio(), before, r.Completed, r.Failed, r.OOMEvents, r.Attempts,
			100*r.MemUtilization, r.SimWall, rss)
	}
	tw.Flush()
}

type packResult struct {
	name                      string
	nsPerOp, perSecond, p99us float64
}

// readPacker reads Go benchmark output and keeps, for each benchmark, the median of
// each figure over its runs.
func readPacker(path string) ([]packResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	figures := map[string]map[string][]float64{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		if figures[name] == nil {
			figures[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				figures[name][fields[i+1]] = append(figures[name][fields[i+1]], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%s holds no benchmark results", path)
	}
	var out []packResult
	for _, n := range order {
		fs := figures[n]
		out = append(out, packResult{name: strings.TrimPrefix(n, "Benchmark"), nsPerOp: median(fs["ns/op"]),
			perSecond: median(fs["decisions/s"]), p99us: median(fs["p99-µs"])})
	}
	return out, nil
}

func printPacker(w io.Writer, packs []packResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tmean\tdecisions/s\tp99\t")
	for _, p := range packs {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t\n", p.name, micros(p.nsPerOp/1e3), p.perSecond, micros(p.p99us))
	}
	tw.Flush()
}

// printTargets checks the issues' targets against what was measured.
func printTargets(w io.Writer, results []simResult, packs []packResult, stops []esResult, facts map[string]computeFacts) error {
	check := checker(w)
	for _, r := range results {
		if r.Policy != simulate.GPUQ {
			continue
		}
		// Every job that fits at some rung completes: the others are the only failures.
		check(r.Failed == r.unfit, "%s: gpuq completes every job that fits at some rung (%d of %d completed, %d fit at no rung)",
			r.trace, r.Completed, r.Jobs, r.unfit)
		if r.before > 0 {
			check(r.Ratio() <= r.before, "%s: makespan %.2f x the lower bound, %.2f before (%+.0f%%): no longer than before",
				r.trace, r.Ratio(), r.before, 100*(r.Ratio()/r.before-1))
		}
		switch r.trace {
		case "gla":
			check(r.Ratio() <= 1.10, "gla: makespan %.2f x the lower bound (target 1.10)", r.Ratio())
		case "mixed-80g":
			check(r.Ratio() <= 1.25, "mixed-80g: makespan %.2f x the lower bound (target 1.25)", r.Ratio())
		case "big":
			check(r.SimWall < 5, "big: %d jobs on %s simulated in %.1f s (target 5 s)", r.Jobs, r.cards, r.SimWall)
		case "shapes-1000":
			check(r.SimWall <= 5, "shapes-1000: %d jobs of 1,000 shapes on %s simulated in %.1f s (target 5 s)", r.Jobs, r.cards, r.SimWall)
			check(r.rss > 0 && r.rss <= 300<<20, "shapes-1000: peak RSS %d MB (target 300 MB; 0: not measured, give -gpuq)", r.rss>>20)
		}
	}
	for _, p := range packs {
		if p.name == "Place/jobs=10000/cards=64" || p.name == "Pack/jobs=10000/cards=64" {
			check(p.p99us < 1000, "%s: p99 decision %s (target 1 ms)", p.name, micros(p.p99us))
		}
	}
	checkEarlyStopping(check, stops)
	return printComputeTargets(w, results, facts, check)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}
