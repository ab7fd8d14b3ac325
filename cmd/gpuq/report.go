package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/report"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

type reportOptions struct {
	io       ioStreams
	settings *settings
	source   string
	output   string
}

func newReportCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &reportOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "report SWEEP|SUMMARY.json|-",
		Short: "Draw a sweep as one HTML page: attempts on cards, memory over time, every job's history",
		Long: `Write a self-contained HTML report of a sweep (it needs no network to be viewed):
where its trainers reported metrics, first what the sweep found (its points ranked as
gpuq results ranks them, each point's curve over the steps, the points stopped early or
failed marked where they ended); then a Gantt chart of the attempts on the cards over time (coloured by outcome, out-of-memory
ends marked, ladder tiers labelled), each card's memory over time (what each attempt
held, sampled, against what gpuq reserved for it), every job's attempts, and the
sweep's figures: makespan, GPU-hours busy, attempt-hours lost (and apart from them,
those of attempts stopped early: their points were losing, as early_stop meant), OOMs,
attempts per job, memory used against reserved.

The report is drawn from a sweep by name: from the gpuq run that runs it, as it runs, or
the daemon's (where no daemon runs, from the state its last one left), else from what
the gpuq run of it that ended last left as it ended; or from the summary gpuq run
--json prints (a file, or - for standard input). gpuq simulate
--report draws one of a simulation, to see a plan before running it ("what if two per
card?").

Exit status: 0 written, 1 it could not be written or the daemon did not answer, 2 bad
input (a sweep that nothing here has, with or without a daemon or its state).`,
		Example: `  gpuq report gla-e1 -o gla-e1.html
  gpuq run sweep.yaml --json > summary.json && gpuq report summary.json
  gpuq run sweep.yaml --json | gpuq report - -o sweep.html
  gpuq simulate examples/traces/gla.yaml --gpu-plan 2 --report two-per-card.html`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.source = args[0]
			return runReport(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "the HTML file to write (default <sweep>-report.html here)")
	return cmd
}

func runReport(opts *reportOptions) error {
	if !isSummary(opts.source) {
		return reportFromDaemon(opts)
	}
	sum, err := readSummary(opts.source, opts.io.In)
	if err != nil {
		return err
	}
	d := reportData(sum, "gpuq run", lastMoment(sum))
	return writeReport(opts.io, opts.output, "-o", d)
}

// isSummary tells a summary file from a sweep's name: a sweep is named with lowercase
// letters, digits, '.', '_' and '-', and no file of that name is here.
func isSummary(arg string) bool {
	if arg == "-" || strings.ContainsRune(arg, '/') || strings.HasSuffix(arg, ".json") {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && !fi.IsDir() // a directory of the sweep's name (its files) is no summary
}

// reportFromDaemon draws a sweep by name (see readSweep) as it stands now: a
// running attempt's bar ends now; one read from what no longer runs ends where its
// last attempt did.
func reportFromDaemon(opts *reportOptions) error {
	read, err := opts.settings.readSweep("report", opts.source)
	if err != nil {
		return err
	}
	now := time.Now()
	if !read.live {
		now = lastMoment(read.sum)
	}
	return writeReport(opts.io, opts.output, "-o", reportData(read.sum, read.from, now))
}

// readSummary reads a gpuq run --json summary from a file, or from in for "-".
func readSummary(path string, in io.Reader) (api.SweepSummary, error) {
	var sum api.SweepSummary
	data, err := readInput(path, in)
	if err != nil {
		return sum, badInput("%s: %v: give the file gpuq run --json wrote, or - to read it from standard input", path, err)
	}
	if err := json.Unmarshal(data, &sum); err != nil || sum.Sweep == "" || sum.Jobs == nil {
		return sum, badInput("%s is not the summary gpuq run --json prints (an object with sweep and jobs)", path)
	}
	return sum, nil
}

func readInput(path string, in io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(in)
	}
	return os.ReadFile(path)
}

// lastMoment is the latest time a summary tells of: where the bar of an attempt still
// running when it was written ends.
func lastMoment(sum api.SweepSummary) time.Time {
	var last time.Time
	for _, j := range sum.Jobs {
		for _, a := range j.Attempts {
			for _, t := range []time.Time{a.Started, a.Ended} {
				if t.After(last) {
					last = t
				}
			}
		}
	}
	return last
}

// reportData is a summary as the report draws it.
func reportData(sum api.SweepSummary, source string, now time.Time) report.Data {
	d := report.Data{Sweep: sum.Sweep, Source: source, Now: now, Found: foundOf(sum)}
	for _, c := range sum.GPUs {
		d.Cards = append(d.Cards, report.Card{Worker: c.Worker, Card: plans.Card{Index: c.Index, Name: c.Name, Total: c.TotalBytes}})
	}
	for _, j := range sum.Jobs {
		rj := report.Job{ID: j.ID, Name: j.Name, State: j.State, Reason: j.Reason, Declared: j.DeclaredBytes}
		if j.LearnedBytes != nil {
			rj.Learned = *j.LearnedBytes
		}
		for _, a := range j.Attempts {
			ra := report.Attempt{N: a.N, Worker: a.Worker, GPUs: a.GPUs, Tier: a.Tier, Estimate: a.EstimateBytes, Peak: peakOf(a),
				Outcome: plans.Outcome(a.Outcome), OOM: a.OOM, Started: a.Started, Ended: a.Ended, Error: a.Error, Util: a.Util}
			if e := exitText(a.ExitStatus); e != "-" {
				ra.Exit = e
			}
			if c := changedText(j.Params, a.Params); c != "-" {
				ra.Changed = c
			}
			if a.EffectiveBatch != nil {
				ra.EffectiveBatch = *a.EffectiveBatch
			}
			for _, m := range a.Memory {
				ra.Memory = append(ra.Memory, state.Sample{At: time.Duration(m.AtSeconds * float64(time.Second)), Bytes: m.Bytes})
			}
			rj.Attempts = append(rj.Attempts, ra)
		}
		d.Jobs = append(d.Jobs, rj)
	}
	return d
}

// writeReport writes the page to path (default <sweep>-report.html), whole or not at
// all, and says where it is; flag is what gave path, for an error.
func writeReport(streams ioStreams, path, flag string, d report.Data) error {
	if path == "" {
		path = d.Sweep + "-report.html"
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gpuq-report-*")
	if err != nil {
		return badInput("cannot write the report to %s (%v): give %s a file in a directory you may write", path, err, flag)
	}
	defer os.Remove(tmp.Name())
	err = report.Write(tmp, d)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	attempts := 0
	for _, j := range d.Jobs {
		attempts += len(j.Attempts)
	}
	fmt.Fprintf(streams.Err, "gpuq: wrote the report of %s (%s, %s) to %s\n", d.Sweep, plans.Count(len(d.Jobs), "job"), plans.Count(attempts, "attempt"), path)
	return nil
}
