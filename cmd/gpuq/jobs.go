package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/state"
)

// fetchJob asks the daemon for one job with its attempts.
func fetchJob(st *settings, id string) (daemon.Job, error) {
	c, err := st.dial()
	if err != nil {
		return daemon.Job{}, err
	}
	return c.Job(id)
}

// The verbs that look at and act on the daemon's jobs.
func newJobCmds(io ioStreams, st *settings) []*cobra.Command {
	return []*cobra.Command{newStatusCmd(io, st), newLogsCmd(io, st), newWhyCmd(io, st),
		newSelectCmd(io, st, daemon.Cancel, "Cancel jobs: queued ones at once, running ones are stopped", "cancelled or stopping"),
		newSelectCmd(io, st, daemon.Retry, "Put failed, cancelled or stopped jobs back in the queue, at the tier they last ran", "requeued"),
		newSelectCmd(io, st, daemon.Hold, "Keep jobs from starting until released; running ones run on", "held"),
		newSelectCmd(io, st, daemon.Release, "Let held jobs start again", "released"),
		newDrainCmd(io, st, true), newDrainCmd(io, st, false)}
}

var shownStates = []state.JobState{state.JobQueued, state.JobHeld, state.JobRunning,
	state.JobSucceeded, state.JobStopped, state.JobFailed, state.JobCancelled}

type statusOptions struct {
	io       ioStreams
	settings *settings
	sweep    string
	states   []string
	json     bool
}

func newStatusCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &statusOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:     "status [ID]",
		Aliases: []string{"ls"},
		Short:   "List the daemon's jobs, or show one job with its attempts",
		Long: `List the daemon's jobs, one line each: its point of the sweep (the parameters its matrix
varies, such as task=sst2,seed=87), state, card, attempt, tier, the memory estimate as
declared and as learned from measured peaks, the peak of the latest attempt, how long
its shape takes as learned from its attempts that succeeded, and how long the latest
attempt ran. A job that waits again after an attempt shows the tier it will run at,
and no card.
With a job ID, show that job with every attempt: the tier and parameters it ran at, its
estimate, its peak, how it ended, and its log; then what its trainer reported of its
training (each metric's latest, lowest and highest, by attempt) and, where its sweep
has early_stop, its readings at the steps it was judged at.

--json prints {"jobs":[...]}, each job as gpuq run --json prints it, with its sweep.`,
		Example: `  gpuq status
  gpuq ls --sweep gla-e1 --state running,queued
  gpuq status gla-e1.7
  gpuq status --json | jq '.jobs[] | select(.state == "failed") | .id'`,
		Args:              maxArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 1 {
				return showJob(opts, args[0])
			}
			return listJobs(opts)
		},
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "only this sweep's jobs")
	cmd.Flags().StringSliceVar(&opts.states, "state", nil, "only jobs in these states: "+statesText())
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

func statesText() string {
	s := make([]string, len(shownStates))
	for i, st := range shownStates {
		s[i] = string(st)
	}
	return strings.Join(s, ",")
}

func listJobs(opts *statusOptions) error {
	for _, s := range opts.states {
		if !slices.Contains(shownStates, state.JobState(s)) {
			return badInput("--state %q: a job is one of %s", s, statesText())
		}
	}
	c, err := opts.settings.dial()
	if err != nil {
		return err
	}
	jobs, err := c.Jobs(opts.sweep, opts.states)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, daemon.JobsResponse{Jobs: jobs})
	}
	printJobs(opts.io.Out, jobs, time.Now(), opts.io.width())
	return nil
}

// printJobs prints one job a line, to fit a terminal of width cells (0: no limit):
// its point of the sweep (the parameters its matrix varies, shortened first), the
// estimate it is placed by (its shape's learned peak once measured, else the declared
// one), and its latest attempt while it runs or once it has ended; a job waiting again
// (after an OOM, say) shows the tier it will run at, not the card and peak of an
// attempt that is over; last, how long its shape takes as learned, left out first
// where the terminal is too narrow for it. Then counts by state.
func printJobs(w io.Writer, jobs []daemon.Job, now time.Time, width int) {
	counts := map[string]int{}
	tw := newFitTable(w, width, 1, 0, 9).cutStarts(0)
	fmt.Fprintln(tw, "JOB\tPOINT\tSTATE\tGPU\tATTEMPT\tTIER\tESTIMATE\tPEAK\tTIME\tTAKES")
	for _, j := range jobs {
		counts[j.State]++
		gpus, n, peak, took := "-", "-", "-", "-"
		if len(j.Attempts) > 0 && j.State != string(state.JobQueued) && j.State != string(state.JobHeld) {
			a := j.Attempts[len(j.Attempts)-1]
			gpus, n, peak, took = cardsOf(a), strconv.Itoa(a.N), top.Gig(peakOf(a)), durationOf(a, now)
		}
		estimate := j.DeclaredBytes
		if j.LearnedBytes != nil {
			estimate = *j.LearnedBytes
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Name, j.State, gpus, n, j.Tier,
			top.Gig(estimate), peak, took, learnedDuration(j.JobSummary))
	}
	tw.Flush()
	fmt.Fprintln(w, countsText(counts))
}

// countsText says how many jobs are in each state, of those there are.
func countsText(counts map[string]int) string {
	var parts []string
	for _, st := range shownStates {
		if counts[string(st)] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[string(st)], st))
		}
	}
	if len(parts) == 0 {
		return "no jobs"
	}
	return strings.Join(parts, ", ")
}

// learnedDuration is how long the job's shape takes, as learned, or "-".
func learnedDuration(j daemon.JobSummary) string {
	if j.LearnedSeconds == nil {
		return "-"
	}
	return plans.FormatDuration(time.Duration(*j.LearnedSeconds * float64(time.Second)).Round(time.Second))
}

// cardsOf names an attempt's cards: "0,1", or on a worker "node7:0,1".
func cardsOf(a daemon.AttemptSummary) string {
	if a.Worker != "" {
		return a.Worker + ":" + intsText(a.GPUs)
	}
	return intsText(a.GPUs)
}

// durationOf is how long an attempt ran, or has run so far.
func durationOf(a daemon.AttemptSummary, now time.Time) string {
	end := a.Ended
	if end.IsZero() {
		end = now
	}
	return end.Sub(a.Started).Round(time.Second).String()
}

func showJob(opts *statusOptions, id string) error {
	j, err := fetchJob(opts.settings, id)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, daemon.JobsResponse{Jobs: []daemon.Job{j}})
	}
	w := opts.io.Out
	fmt.Fprintf(w, "job %s of sweep %s: %s\n", j.ID, j.Sweep, j.State)
	if j.Reason != "" {
		fmt.Fprintf(w, "  %s\n", j.Reason)
	}
	fmt.Fprintf(w, "  point: %s\n", j.Name)
	learned := "not measured yet"
	if j.LearnedBytes != nil {
		learned = plans.FormatSize(*j.LearnedBytes) + " (measured peak of its shape)"
	}
	fmt.Fprintf(w, "  memory: declared %s, learned %s\n", sizeOrDash(j.DeclaredBytes), learned)
	if j.LearnedSeconds != nil {
		fmt.Fprintf(w, "  duration: learned %s (its shape's attempts that succeeded, %d of them)\n", learnedDuration(j.JobSummary), j.LearnedRuns)
	} else {
		fmt.Fprintln(w, "  duration: not learned yet (no attempt of its shape has succeeded)")
	}
	if len(j.Attempts) == 0 {
		fmt.Fprintf(w, "  no attempt yet; gpuq why %s says why it waits\n", j.ID)
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "ATTEMPT\tGPU\tTIER\tCHANGED\tEFF. BATCH\tESTIMATE\tPEAK\tOUTCOME\tSTARTED\tTIME")
	now := time.Now()
	for _, a := range j.Attempts {
		eb := "-"
		if a.EffectiveBatch != nil {
			eb = strconv.FormatInt(*a.EffectiveBatch, 10)
		}
		outcome := a.Outcome
		if outcome == "" {
			outcome = "running"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, cardsOf(a), a.Tier, changedText(j.Params, a.Params),
			eb, plans.FormatSize(a.EstimateBytes), sizeOrDash(peakOf(a)), outcome, a.Started.Format("01-02 15:04:05"), durationOf(a, now))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, a := range j.Attempts {
		fmt.Fprintf(w, "  log of attempt %d: %s\n", a.N, a.Log)
	}
	printTraining(w, j.JobSummary)
	return nil
}

func newWhyCmd(io ioStreams, st *settings) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "why ID",
		Short: "Say why a queued job waits",
		Long: `Say why a queued job has not started: no free slot, not enough free memory on any
card with a slot, cards reserved for a larger job ahead of it, waiting for an idle card or
for host RAM, held by you, or waiting for its shape's probe. For a job that is not
queued, say what it is doing (exit 0, as for one that waits); an unknown job is exit 2.`,
		Example:           "  gpuq why gla-e1.12",
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := st.dial()
			if err != nil {
				return err
			}
			out, err := c.Why(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(io.Out, out)
			}
			if out.Reason != "" {
				fmt.Fprintf(io.Out, "%s waits (%s): %s\n", out.Job, out.Reason, out.Detail)
			} else {
				fmt.Fprintf(io.Out, "%s: %s\n", out.Job, out.Detail)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"job","reason","detail"}`)
	return cmd
}

// newSelectCmd is a verb that acts on jobs named by id or on a whole sweep.
func newSelectCmd(io ioStreams, st *settings, verb daemon.Verb, short, done string) *cobra.Command {
	var sweep string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   string(verb) + " ID...|--sweep SWEEP",
		Short: short,
		Long: short + `.

Name jobs by id, or every job of a sweep with --sweep (its jobs to which the verb does
not apply are passed over). A named job to which it does not apply is an error, and
then nothing is changed.`,
		Example:           fmt.Sprintf("  gpuq %s gla-e1.3 gla-e1.4\n  gpuq %s --sweep gla-e1", verb, verb),
		ValidArgsFunction: completeJobs(st),
		RunE: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) > 0 && sweep != "":
				return badInput("name jobs or give --sweep, not both; see gpuq %s --help", verb)
			case len(args) == 0 && sweep == "":
				return badInput("name the jobs to %s (gpuq %s ID...), or a sweep (--sweep SWEEP)", verb, verb)
			}
			c, err := st.dial()
			if err != nil {
				return err
			}
			ids, err := c.Act(verb, daemon.SelectRequest{IDs: args, Sweep: sweep})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(io.Out, daemon.SelectResponse{Jobs: ids})
			}
			if len(ids) == 0 {
				fmt.Fprintf(io.Out, "no job of %s to %s\n", sweep, verb)
				return nil
			}
			fmt.Fprintf(io.Out, "%s: %s\n", done, strings.Join(ids, " "))
			return nil
		},
	}
	cmd.Flags().StringVar(&sweep, "sweep", "", "every job of this sweep")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"jobs":[...]}, the jobs changed`)
	return cmd
}

func newDrainCmd(io ioStreams, st *settings, on bool) *cobra.Command {
	verb, short := "drain", "Start no new job on a card; its running jobs finish"
	if !on {
		verb, short = "undrain", "Let a drained card take jobs again"
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " GPU",
		Short: short,
		Long: short + `. GPU is its index, as nvidia-smi numbers it; a worker's card is
WORKER:INDEX (node7:3). The daemon remembers it across restarts.`,
		Example: "  gpuq " + verb + " 3\n  gpuq " + verb + " node7:3",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			card, err := plans.ParseCardID(args[0])
			if err != nil {
				return badInput("%v", err)
			}
			req := daemon.DrainRequest{Worker: card.Worker, GPU: card.Index, On: on}
			c, err := st.dial()
			if err != nil {
				return err
			}
			if err := c.DrainCard(req); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(io.Out, req)
			}
			if on {
				fmt.Fprintf(io.Out, "GPU %s drained: no new job starts there; gpuq undrain %s undoes it\n", args[0], args[0])
			} else {
				fmt.Fprintf(io.Out, "GPU %s takes jobs again\n", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"gpu","on"}, and "worker" for a worker's card`)
	return cmd
}

// completeJobs completes job ids from the running daemon, if one answers.
func completeJobs(st *settings) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if err := st.load(cmd.Root().PersistentFlags()); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := st.dial()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		jobs, err := c.Jobs("", nil)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, j := range jobs {
			if strings.HasPrefix(j.ID, prefix) {
				out = append(out, cobra.CompletionWithDesc(j.ID, j.State))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
