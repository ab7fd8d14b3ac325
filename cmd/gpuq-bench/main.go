// Command gpuq-bench prints gpuq's benchmark table (make bench): every trace of
// examples/traces simulated under each policy, and the packer's Go benchmarks, each
// time the median of several runs; then the targets, met or not.
//
//	go test -run '^$' -bench 'Pack|Place' -count 5 ./scheduler/ > packer.txt
//	go run ./cmd/gpuq-bench -packer packer.txt -gpuq bin/gpuq
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/sim"
)

func main() {
	traces := flag.String("traces", "examples/traces", "directory of traces to simulate")
	runs := flag.Int("runs", 5, "runs of each simulation; wall times are their median")
	packer := flag.String("packer", "", "output of go test -bench 'Pack|Place' to summarise")
	gpuq := flag.String("gpuq", "", "a built gpuq binary, to measure its daemon")
	flag.Parse()
	if err := run(os.Stdout, *traces, *runs, *packer, *gpuq); err != nil {
		fmt.Fprintln(os.Stderr, "gpuq-bench:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, traceDir string, runs int, packerOut, gpuq string) error {
	files, err := filepath.Glob(filepath.Join(traceDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no traces in %s", traceDir)
	}
	var results []simResult
	for _, f := range files {
		rs, err := simulate(f, runs)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	fmt.Fprintf(w, "Simulations (virtual time; sim wall is the median of %d runs, trace loading included)\n\n", runs)
	printSims(w, results)

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
	}
	fmt.Fprintln(w, "\nTargets")
	printTargets(w, results, packs)
	return nil
}

type simResult struct {
	trace string
	sim.Result
	cards string
	unfit int // jobs that fit at no rung
}

// simulate runs one trace under every policy, runs times each. Virtual-time results
// are deterministic; runs differing would be a bug, and is reported as one.
func simulate(file string, runs int) ([]simResult, error) {
	var out []simResult
	for _, p := range sim.Policies {
		var walls []float64
		var first sim.Result
		for i := range runs {
			began := time.Now()
			t, err := sim.Load(file, plans.Overrides{})
			if err != nil {
				return nil, err
			}
			r, err := sim.Run(t, p)
			if err != nil {
				return nil, err
			}
			walls = append(walls, time.Since(began).Seconds())
			if i == 0 {
				first = r
				out = append(out, simResult{trace: strings.TrimSuffix(filepath.Base(file), ".yaml"), cards: t.Sweep.GPUs.String(),
					unfit: len(sim.Unfit(t))})
			} else if r.Makespan != first.Makespan || r.Completed != first.Completed {
				return nil, fmt.Errorf("%s, policy %s: run %d differs from run 1", file, p, i+1)
			}
		}
		first.SimWall = median(walls)
		out[len(out)-1].Result = first
	}
	return out, nil
}

func printSims(w io.Writer, results []simResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "trace\tcards\tjobs\tpolicy\tmakespan\tbound\tx bound\tcompleted\tfailed\tOOMs\tattempts\tmem used\tsim wall\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.2f\t%d\t%d\t%d\t%d\t%.0f%%\t%.2fs\t\n", r.trace, r.cards, r.Jobs, r.Policy,
			sim.Hours(r.Makespan), sim.Hours(r.LowerBound), r.Ratio(), r.Completed, r.Failed, r.OOMEvents, r.Attempts,
			100*r.MemUtilization, r.SimWall)
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

// printTargets checks the targets against what was measured.
func printTargets(w io.Writer, results []simResult, packs []packResult) {
	check := func(ok bool, format string, args ...any) {
		mark := "MET    "
		if !ok {
			mark = "NOT MET"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, fmt.Sprintf(format, args...))
	}
	for _, r := range results {
		if r.Policy != sim.GPUQ {
			continue
		}
		// Every job that fits at some rung completes: the others are the only failures.
		check(r.Failed == r.unfit, "%s: gpuq completes every job that fits at some rung (%d of %d completed, %d fit at no rung)",
			r.trace, r.Completed, r.Jobs, r.unfit)
		switch r.trace {
		case "gla":
			check(r.Ratio() <= 1.10, "gla: makespan %.2f x the lower bound (target 1.10)", r.Ratio())
		case "mixed-80g":
			check(r.Ratio() <= 1.25, "mixed-80g: makespan %.2f x the lower bound (target 1.25)", r.Ratio())
		case "big":
			check(r.SimWall < 10, "big: %d jobs on %s simulated in %.1f s (target 10 s)", r.Jobs, r.cards, r.SimWall)
		}
	}
	for _, p := range packs {
		if p.name == "Place/jobs=10000/cards=64" || p.name == "Pack/jobs=10000/cards=64" {
			check(p.p99us < 1000, "%s: p99 decision %s (target 1 ms)", p.name, micros(p.p99us))
		}
	}
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
