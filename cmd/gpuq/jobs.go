package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// fetchJob asks the daemon for one job with its attempts.
func fetchJob(client func() (daemonClient, error), id string) (api.Job, error) {
	c, err := client()
	if err != nil {
		return api.Job{}, err
	}
	return c.Job(id)
}

// The verbs that look at and act on the daemon's jobs.
func newJobCmds(io ioStreams, st *settings) []*cobra.Command {
	return []*cobra.Command{newStatusCmd(io, st), newLogsCmd(io, st), newWhyCmd(io, st),
		newSelectCmd(io, st, api.Cancel, "Cancel jobs: queued ones at once, running ones are stopped", "cancelled or stopping"),
		newSelectCmd(io, st, api.Retry, "Put failed, cancelled or stopped jobs back in the queue, at the tier they last ran (one being cancelled, once it has stopped)", "requeued"),
		newSelectCmd(io, st, api.Hold, "Keep jobs from starting until released; running ones run on", "held"),
		newSelectCmd(io, st, api.Release, "Let held jobs start again", "released"),
		newDrainCmd(io, st, true), newDrainCmd(io, st, false)}
}

var shownStates = []state.JobState{state.JobQueued, state.JobHeld, state.JobBlocked, state.JobRunning,
	state.JobSucceeded, state.JobStopped, state.JobFailed, state.JobCancelled}

type statusOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	now    func() time.Time
	sweep  string
	states []string
	where  string
	json   bool
	all    bool
	format string
}

func newStatusCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &statusOptions{io: io, client: st.readClient, now: time.Now}
	cmd := &cobra.Command{
		Use:     "status [ID]",
		Aliases: []string{"ls"},
		Short:   "List the daemon's jobs (and a gpuq run's), or show one job with its attempts",
		Long: `List the daemon's jobs, and those of each gpuq run in the foreground, one line
each: its name (the sweep's job_name filled in, or by default the values of its point
that differ between jobs, such as glue-sst2,seed=87), state (blocked: waiting for what
it runs after), card, attempt, tier, the memory estimate as declared and as learned
from measured peaks, the peak of the latest attempt, how long the latest attempt ran,
how much of a card's compute its shape keeps busy as measured (UTIL), how long its
shape takes as learned from its attempts that succeeded, and why a job that failed, was
cancelled or was stopped early ended (its error line: the exception line of its
trainer's last traceback, else its last line; for one stopped early, the reading it
lost by), or what a blocked one runs after. A job that waits again after an attempt
shows the tier it will run at, no card, its attempts so far, and how the latest ended
as its reason (requeued after gpu-oom at tier 0); a running job that is held shows
running,held (it is not started again until released), and one whose worker is away
running,away, with since when and how long the worker has to come back as its reason.
On a narrow terminal UTIL, then TAKES, then ATTEMPT are left out, names lose their
middle, and REASON is left out too, each reason then following the table; narrower
still (60 columns), PEAK, then TIER, then ESTIMATE, GPU and TIME give way before names
lose their numbers.

--where lists the jobs whose parameters have the values it gives: key=value pairs,
all of which a job must have, a value's alternatives separated by | (quote it for the
shell: --where 'task=glue-sst2,seed=87|88'). With neither a daemon nor a gpuq run
running on the state directory, the jobs are read from its state as the last daemon
left it.

By default the list is the jobs that wait or run and the ` + strconv.Itoa(lastEnded) + ` that ended last; --all
lists every job, and --state lists every job in those states.

--format picks the columns, as sacct's --format does: names separated by commas, in
any case, each with an optional %WIDTH that cuts its values to that many cells
(point%30). The columns: ` + columnNames() + `.
START and END are when the job's first attempt started and when the job ended,
ELAPSED the time between (so far, while it runs) as [DAYS-]HH:MM:SS, EXIT the exit
status of its latest attempt's trainer or the signal that killed it.

With a job ID, show that job with every attempt: the tier and parameters it ran at, its
estimate, its peak, how it ended (exit status or signal, and its error line), its
command and its log; then what its trainer reported of its training (each metric's
latest, lowest and highest, by attempt) and, where its sweep has early_stop, its
readings at the steps it was judged at.

--json prints {"jobs":[...]}, every job (as --all), each as gpuq run --json prints it,
with its sweep: per attempt and job, "exit_code" (null where a signal ended it),
"signal", "error", "command", and the job's "started" and "ended".`,
		Example: `  gpuq status
  gpuq ls --sweep gla-e1 --state running,queued
  gpuq status --where 'task=glue-sst2,seed=87|88'
  gpuq status --all --format jobid,point%30,state,start,end,elapsed,exitcode
  gpuq status gla-e1.7
  gpuq status --json | jq '.jobs[] | select(.state == "failed") | {id, exit_code, error}'`,
		Args:              maxArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE:              func(_ *cobra.Command, args []string) error { return runStatus(opts, args) },
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "only this sweep's jobs")
	cmd.Flags().StringSliceVar(&opts.states, "state", nil, "only jobs in these states (all of them): "+statesText())
	cmd.Flags().StringVar(&opts.where, "where", "", "only jobs whose parameters have these values: "+whereSyntax)
	cmd.Flags().BoolVar(&opts.all, "all", false, "every job, not only those that wait or run and the "+strconv.Itoa(lastEnded)+" that ended last")
	cmd.Flags().StringVarP(&opts.format, "format", "o", "", "the columns, as sacct --format: "+columnNames())
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON, every job")
	return cmd
}

func statesText() string {
	s := make([]string, len(shownStates))
	for i, st := range shownStates {
		s[i] = string(st)
	}
	return strings.Join(s, ",")
}

// runStatus lists the jobs, or shows the one named.
func runStatus(opts *statusOptions, args []string) error {
	if len(args) == 1 {
		return showJob(opts, args[0])
	}
	return listJobs(opts)
}

func listJobs(opts *statusOptions) error {
	for _, s := range opts.states {
		if !slices.Contains(shownStates, state.JobState(s)) {
			return badInput("--state %q: a job is one of %s", s, statesText())
		}
	}
	format := opts.format
	if format == "" {
		format = defaultFormat
	}
	cols, err := parseFormat(format)
	if err != nil {
		return err
	}
	c, err := opts.client()
	if err != nil {
		return err
	}
	// --json is the daemon's listing as it comes; with --where, the jobs are read to
	// select them, and a key no job has is refused before a line is printed.
	if opts.json && opts.where == "" {
		body, err := c.JobsJSON(opts.sweep, opts.states)
		if err != nil {
			return err
		}
		defer body.Close()
		return indentJobs(opts.io.Out, body)
	}
	jobs, err := c.Jobs(opts.sweep, opts.states)
	if err != nil {
		return err
	}
	if jobs, err = where(jobs, opts.where); err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, api.JobsResponse{Jobs: jobs})
	}
	l := jobList{jobs: jobs, now: opts.now(), width: opts.io.width(), cols: cols, fitDefault: opts.format == ""}
	if !opts.all && len(opts.states) == 0 {
		l.shown, l.ended = recent(jobs)
	}
	l.print(opts.io.Out)
	return nil
}

// whereSyntax is how --where is written, the same on every verb that takes it.
const whereSyntax = "key=value pairs, all of them, a value's alternatives separated by | ('task=sst2,seed=87|88')"

// where is the jobs whose parameters meet the selection --where gives; a key that no
// job has is bad input, with the one meant.
func where(jobs []api.Job, sel string) ([]api.Job, error) {
	w, err := plans.ParseWhere(sel)
	if err != nil || w == nil {
		return jobs, whereError(err)
	}
	out := []api.Job{} // none selected is {"jobs": []} in --json, not null
	keys := map[string]bool{}
	for _, j := range jobs {
		for _, k := range j.Params.Keys {
			keys[k] = true
		}
		if w.Matches(j.Params) {
			out = append(out, j)
		}
	}
	if err := w.Unknown(slices.Sorted(maps.Keys(keys))); err != nil && len(jobs) > 0 {
		return nil, whereError(err)
	}
	return out, nil
}

// whereError is a --where that cannot select: bad input.
func whereError(err error) error {
	if err == nil {
		return nil
	}
	return badInput("--where: %v", err)
}

// lastEnded is how many of the jobs that ended gpuq status lists without --all: with
// those that wait or run, enough to see what just happened, not a sweep's history.
const lastEnded = 10

// recent is the jobs gpuq status lists by default: those that wait or run, and the
// lastEnded that ended last, in the order given; and how many jobs ended in all.
func recent(jobs []api.Job) (shown []api.Job, ended int) {
	var over []int
	for i, j := range jobs {
		if hasEnded(j) {
			over = append(over, i)
		}
	}
	slices.SortStableFunc(over, func(a, b int) int { return endOf(jobs[b]).Compare(endOf(jobs[a])) })
	keep := map[int]bool{}
	for _, i := range over[:min(len(over), lastEnded)] {
		keep[i] = true
	}
	for i, j := range jobs {
		if !hasEnded(j) || keep[i] {
			shown = append(shown, j)
		}
	}
	return shown, len(over)
}

// hasEnded reports whether the job succeeded, failed, was cancelled or was stopped
// early (see ended).
func hasEnded(j api.Job) bool { return ended(j.State) }

// endOf is when the job ended; zero while it has not, or where no end was kept.
func endOf(j api.Job) time.Time {
	if j.Ended == nil {
		return time.Time{}
	}
	return *j.Ended
}

// jobList is a listing of jobs to print (see print).
type jobList struct {
	jobs  []api.Job
	now   time.Time
	width int // the terminal's; 0: piped, every value whole
	cols  []shownColumn
	// shown, when not nil, is the jobs listed of jobs, ended how many of them ended:
	// the default listing (see recent).
	shown []api.Job
	ended int
	// fitDefault: the default columns, of which UTIL, then TAKES, then ATTEMPT, are
	// left out where the terminal is too narrow for every value whole.
	fitDefault bool
}

// print prints one job a line, to fit a terminal of width cells: the columns of cols,
// JOB and NAME (or POINT) shortened first (see fitTable), the last column shortened or
// left out; UTIL, then TAKES, then ATTEMPT left out where the rest would not fit, and
// PEAK, TIER, ESTIMATE, GPU and TIME where even the shortened ids and names leave too
// little room. A job
// waiting again (after an OOM, say) shows the tier it will run at, not the card and
// peak of an attempt that is over, and its attempts so far with how the latest ended
// (see reasonOf).
// Then counts by state of every job, what the default listing left out, and, where
// REASON had no room, each job's reason.
func (l jobList) print(w io.Writer) {
	counts := map[string]int{}
	for _, j := range l.jobs {
		counts[j.State]++
	}
	shown := l.jobs
	if l.shown != nil {
		shown = l.shown
	}
	var cut, starts, names, drop []int
	for i, c := range l.cols {
		if c.cut {
			cut = append(cut, i)
		}
		if c.cutStart {
			starts = append(starts, i)
		}
		if c.cutName {
			names = append(names, i)
		}
	}
	var squeeze []int
	if l.fitDefault {
		for _, name := range []string{"util", "takes", "attempt"} {
			if i := slices.IndexFunc(l.cols, func(c shownColumn) bool { return c.name == name }); i >= 0 {
				drop = append(drop, i)
			}
		}
		// Narrower still (60 columns, 40), where the ids cut to their least and the
		// names to their numbers and their text values' ends leave too little room: the
		// peak (ESTIMATE says what the job is packed by), then the tier (a reason says
		// at what tier a job waits again), then the estimate, the card and the time go,
		// leaving JOB, NAME and STATE.
		for _, name := range []string{"peak", "tier", "estimate", "gpu", "time"} {
			if i := slices.IndexFunc(l.cols, func(c shownColumn) bool { return c.name == name }); i >= 0 {
				squeeze = append(squeeze, i)
			}
		}
	}
	// Ids are cut first, a sweep's jobs sharing their start, then names (what tells
	// the jobs apart), the rest as they come.
	slices.SortStableFunc(cut, func(a, b int) int { return l.cols[a].cutOrder - l.cols[b].cutOrder })
	tw := newFitTable(w, l.width, cut...).cutStarts(starts...).cutNames(names...).dropping(drop...).squeezing(squeeze...).toEnds()
	headers := make([]string, len(l.cols))
	for i, c := range l.cols {
		headers[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	// A column of names given a width (--format name%20) is cut as one, so that two
	// names that differ only where a cut would fall stay told apart (top.CutNames).
	named := map[int][]string{}
	for i, c := range l.cols {
		if c.cutName && c.width > 0 {
			vals := make([]string, len(shown))
			for k, j := range shown {
				vals[k] = c.value(j, l.now)
			}
			named[i] = top.CutNames(vals, c.width)
		}
	}
	for k, j := range shown {
		cells := make([]string, len(l.cols))
		for i, c := range l.cols {
			if n, ok := named[i]; ok {
				cells[i] = n[k]
				continue
			}
			cells[i] = c.cell(j, l.now)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	// Every state at once (blocked and stopped too) is wider than a terminal of 80.
	fmt.Fprintln(w, wrapItems(countsText(counts), l.width))
	if l.shown != nil && len(shown) < len(l.jobs) {
		fmt.Fprintln(w, wrap(fmt.Sprintf("%s, the %d that ended last shown; gpuq status --all lists every job",
			plans.Count(l.ended, "job")+" ended", min(l.ended, lastEnded)), l.width, ""))
	}
	reason := slices.IndexFunc(l.cols, func(c shownColumn) bool { return c.name == "reason" })
	if reason >= 0 && tw.hid(reason, len(l.cols)-1) {
		for _, j := range shown {
			if r := reasonOf(j, l.now); r != "-" {
				fmt.Fprintln(w, wrapHanging("  ", "    ", fmt.Sprintf("%s %s: %s", j.ID, j.State, r), l.width))
			}
		}
	}
}

// A statusColumn is a column gpuq status shows (--format): its name and those sacct
// gives it, its header, and its value of a job at a time.
type statusColumn struct {
	name    string
	aliases []string
	header  string
	value   func(j api.Job, now time.Time) string
	// cut: a narrow terminal shortens its values (cutStart: at their start, as job
	// ids, whose number tells them apart; cutName: their keys first, as names and
	// points, see top.CutName), in cutOrder.
	cut, cutStart, cutName bool
	cutOrder               int
}

// A shownColumn is a column as --format asks for it: at most width cells (0: any).
type shownColumn struct {
	statusColumn
	width int
}

// cell is the column's value of j, cut to its width; a column of names is cut as one
// (see jobList.print).
func (c shownColumn) cell(j api.Job, now time.Time) string {
	v := c.value(j, now)
	if c.width <= 0 || ansi.StringWidth(v) <= c.width {
		return v
	}
	return ansi.Truncate(v, c.width, "…")
}

// defaultFormat is gpuq status's columns without --format.
const defaultFormat = "id,name,state,gpu,attempt,tier,estimate,peak,time,util,takes,reason"

// statusColumns are the columns gpuq status can show, in the order --help lists them.
var statusColumns = []statusColumn{
	{name: "id", aliases: []string{"jobid"}, header: "JOB", cut: true, cutStart: true,
		value: func(j api.Job, _ time.Time) string { return j.ID }},
	{name: "sweep", header: "SWEEP", cut: true, cutOrder: 1, value: func(j api.Job, _ time.Time) string { return j.Sweep }},
	{name: "name", aliases: []string{"jobname"}, header: "NAME", cut: true, cutName: true, cutOrder: 1,
		value: func(j api.Job, _ time.Time) string { return j.Name }},
	{name: "point", header: "POINT", cut: true, cutName: true, cutOrder: 1,
		value: func(j api.Job, _ time.Time) string { return cmp.Or(j.Point, "-") }},
	{name: "state", header: "STATE", value: func(j api.Job, _ time.Time) string { return stateText(j) }},
	{name: "gpu", aliases: []string{"nodelist"}, header: "GPU", value: latestOf(func(a api.AttemptSummary, _ time.Time) string { return cardsOf(a) })},
	{name: "attempt", header: "ATTEMPT", value: attemptsOf},
	{name: "tier", header: "TIER", value: func(j api.Job, _ time.Time) string { return strconv.Itoa(j.Tier) }},
	{name: "estimate", header: "ESTIMATE", value: func(j api.Job, _ time.Time) string { return top.Gig(estimateOf(j.JobSummary)) }},
	{name: "peak", header: "PEAK", value: latestOf(func(a api.AttemptSummary, _ time.Time) string { return top.Gig(peakOf(a)) })},
	{name: "time", header: "TIME", value: latestOf(durationOf)},
	{name: "util", header: "UTIL", value: func(j api.Job, _ time.Time) string { return learnedUtil(j.JobSummary) }},
	{name: "takes", header: "TAKES", value: func(j api.Job, _ time.Time) string { return learnedDuration(j.JobSummary) }},
	{name: "start", header: "START", value: func(j api.Job, _ time.Time) string { return stamp(j.Started) }},
	{name: "end", header: "END", value: func(j api.Job, _ time.Time) string { return stamp(j.Ended) }},
	{name: "elapsed", header: "ELAPSED", value: elapsedOf},
	{name: "exit", aliases: []string{"exitcode"}, header: "EXIT", value: func(j api.Job, _ time.Time) string { return exitText(j.ExitStatus) }},
	{name: "reason", header: "REASON", cut: true, cutOrder: 2, value: reasonOf},
	{name: "error", header: "ERROR", cut: true, cutOrder: 2, value: func(j api.Job, _ time.Time) string { return cmp.Or(j.Error, "-") }},
	{name: "command", header: "COMMAND", cut: true, cutOrder: 2, value: func(j api.Job, _ time.Time) string {
		return cmp.Or(strings.Join(j.Command, " "), "-")
	}},
}

// columnNames lists the columns --format takes.
func columnNames() string {
	names := make([]string, len(statusColumns))
	for i, c := range statusColumns {
		names[i] = c.name
		if len(c.aliases) > 0 {
			names[i] += " (" + strings.Join(c.aliases, ", ") + ")"
		}
	}
	return strings.Join(names, ", ")
}

// parseFormat reads --format: column names separated by commas, in any case, each with
// an optional %WIDTH.
func parseFormat(format string) ([]shownColumn, error) {
	var cols []shownColumn
	for _, f := range strings.Split(format, ",") {
		name, width, hasWidth := strings.Cut(strings.ToLower(strings.TrimSpace(f)), "%")
		i := slices.IndexFunc(statusColumns, func(c statusColumn) bool { return c.name == name || slices.Contains(c.aliases, name) })
		if i < 0 {
			return nil, badInput("--format: no column %q; the columns are %s", name, columnNames())
		}
		c := shownColumn{statusColumn: statusColumns[i]}
		if hasWidth {
			n, err := strconv.Atoi(width)
			if err != nil || n < 1 {
				return nil, badInput("--format %s: %q is not a width; write a number of cells, as in point%%30", f, width)
			}
			c.width = n
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// stateText is a job's state in a listing: a running job that is held says so, and
// one whose worker is away.
func stateText(j api.Job) string {
	s := j.State
	if j.Held && j.State == string(state.JobRunning) {
		s += ",held"
	}
	if awayOf(j) != nil {
		s += ",away"
	}
	return s
}

// awayOf is the running attempt's worker's absence, where it is away; nil otherwise.
func awayOf(j api.Job) *api.WorkerAway {
	if n := len(j.Attempts); n > 0 && j.State == string(state.JobRunning) {
		return j.Attempts[n-1].WorkerAway
	}
	return nil
}

// latestOf is a column of the job's latest attempt while it runs or once it has ended,
// "-" otherwise: a job waiting again (after an OOM) shows no card or peak of an attempt
// that is over.
func latestOf(value func(a api.AttemptSummary, now time.Time) string) func(api.Job, time.Time) string {
	return func(j api.Job, now time.Time) string {
		if len(j.Attempts) == 0 || waiting(j.State) {
			return "-"
		}
		return value(j.Attempts[len(j.Attempts)-1], now)
	}
}

// waiting says whether a job in state s (as the API shows it) waits in the queue,
// held or blocked included: none of its attempts runs, and the next has not started.
func waiting(s string) bool {
	switch state.JobState(s) {
	case state.JobQueued, state.JobHeld, state.JobBlocked:
		return true
	}
	return false
}

// attemptsOf is how many attempts the job has had so far (its latest's number), that
// of a job waiting again after one too, or "-" where it has had none.
func attemptsOf(j api.Job, _ time.Time) string {
	if len(j.Attempts) == 0 {
		return "-"
	}
	return strconv.Itoa(j.Attempts[len(j.Attempts)-1].N)
}

// sacctTime is how START and END are written, as sacct writes them.
const sacctTime = "2006-01-02T15:04:05"

// stamp is a time as START and END show it, "-" for none.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format(sacctTime)
}

// elapsedOf is how long the job has run, from its first attempt's start to its end,
// or to now while it has not ended, as sacct writes it: [DAYS-]HH:MM:SS.
func elapsedOf(j api.Job, now time.Time) string {
	if j.Started == nil {
		return "-"
	}
	end := now
	switch {
	case j.Ended != nil:
		end = *j.Ended
	case hasEnded(j):
		return "-"
	}
	d := max(end.Sub(*j.Started), 0).Round(time.Second)
	days, rest := d/(24*time.Hour), d%(24*time.Hour)
	hms := fmt.Sprintf("%02d:%02d:%02d", rest/time.Hour, rest%time.Hour/time.Minute, rest%time.Minute/time.Second)
	if days > 0 {
		return fmt.Sprintf("%d-%s", days, hms)
	}
	return hms
}

// exitText is an exit in a column: the status, the signal, or "-".
func exitText(e api.ExitStatus) string {
	switch {
	case e.Signal != "":
		return e.Signal
	case e.ExitCode != nil:
		return strconv.Itoa(*e.ExitCode)
	}
	return "-"
}

// reasonOf says briefly why a job that failed, was cancelled or was stopped early
// ended: its trainer's error line where that trainer failed on its own, else gpuq's
// reason (early_stop's verdict, for one stopped); for a blocked one, what it runs
// after (api.AfterReason); for a queued or held one that has run, how its latest
// attempt ended (api.Requeued), and for one moved down its ladder before it ran, that;
// for a running one whose worker is away, that and what becomes of it at now, and for
// one gpuq cancel is stopping, that; "-" for others.
func reasonOf(j api.Job, now time.Time) string {
	if away := awayOf(j); away != nil {
		return away.Text(j.Attempts[len(j.Attempts)-1].Worker, now)
	}
	switch state.JobState(j.State) {
	case state.JobFailed, state.JobCancelled, state.JobStopped, state.JobBlocked:
	case state.JobQueued, state.JobHeld:
		if n := len(j.Attempts); n > 0 && j.Attempts[n-1].Outcome != "" {
			return api.Requeued(j.Attempts[n-1].Outcome, j.Attempts[n-1].Tier)
		}
		if j.Tier > 0 && len(j.Attempts) == 0 {
			// Stepped down its ladder by what other jobs of its shape proved.
			return fmt.Sprintf("moved to tier %d before it ran: at the tiers before, its shape needs more than any card has room for", j.Tier)
		}
		return "-"
	case state.JobRunning:
		switch {
		case j.RetryOnStop:
			return "being cancelled; gpuq retry requeues it once it has stopped"
		case j.Cancelling:
			return "being cancelled"
		}
		return "-"
	default:
		return "-"
	}
	if n := len(j.Attempts); n > 0 && j.Attempts[n-1].Outcome == string(plans.Failed) && j.Error != "" {
		return j.Error
	}
	return cmp.Or(j.Reason, "-")
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
func learnedDuration(j api.JobSummary) string {
	if j.LearnedSeconds == nil {
		return "-"
	}
	return plans.FormatDuration(time.Duration(*j.LearnedSeconds * float64(time.Second)).Round(time.Second))
}

// learnedUtil is how much of a card's compute the job's shape keeps busy, as learned
// (see top.UtilText).
func learnedUtil(j api.JobSummary) string {
	return top.UtilText(j.LearnedUtil, j.UtilUnmeasured)
}

// cardsOf names an attempt's cards: "0,1", or on a worker "node7:0,1".
func cardsOf(a api.AttemptSummary) string { return plans.Cards(a.Worker, a.GPUs) }

// durationOf is how long an attempt ran, or has run so far.
func durationOf(a api.AttemptSummary, now time.Time) string {
	end := a.Ended
	if end.IsZero() {
		end = now
	}
	return end.Sub(a.Started).Round(time.Second).String()
}

func showJob(opts *statusOptions, id string) error {
	c, err := opts.client()
	if err != nil {
		return err
	}
	j, _, err := jobOrLeft(c, id, opts.io.Err)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, api.JobsResponse{Jobs: []api.Job{j}})
	}
	printJob(opts.io.Out, j, opts.now(), opts.io.width())
	return nil
}

// estimateOf is what the packer reserves for a job's next attempt, as it reckons it:
// its shape's measured peak, else its declared estimate, and never less than an
// out-of-memory end proved its shape needs (see state.EstimateBy).
func estimateOf(j api.JobSummary) int64 {
	est := j.DeclaredBytes
	if j.LearnedBytes != nil {
		est = *j.LearnedBytes
	}
	if j.FloorBytes != nil {
		est = max(est, *j.FloorBytes)
	}
	return est
}

// printJob prints one job with every attempt, to fit a terminal of width cells (0: no
// limit) but for paths and the command: its state and why it ended, its point, when it
// ran, its memory, duration and utilization as learned, a line per attempt, then how each attempt
// ended (its exit status or signal and error line), where its log is, and the command
// its latest attempt ran.
func printJob(w io.Writer, j api.Job, now time.Time, width int) {
	line := func(format string, args ...any) {
		fmt.Fprintln(w, wrapHanging("  ", "    ", fmt.Sprintf(format, args...), width))
	}
	fmt.Fprintf(w, "job %s (%s) of sweep %s: %s\n", j.ID, j.Name, j.Sweep, stateText(j))
	if j.Reason != "" {
		line("%s", j.Reason)
	}
	if j.Held && j.State == string(state.JobRunning) {
		line("held: it runs on, and is not started again until released (gpuq release %s)", j.ID)
	}
	if away := awayOf(j); away != nil {
		line("%s", away.Text(j.Attempts[len(j.Attempts)-1].Worker, now))
	}
	if j.Point != "" {
		line("point: %s", j.Point)
	}
	if j.Started != nil {
		line("ran: started %s, ended %s, elapsed %s", stamp(j.Started), stamp(j.Ended), elapsedOf(j, now))
	}
	learned := "not measured yet"
	if j.LearnedBytes != nil {
		learned = plans.FormatSize(*j.LearnedBytes) + " (measured peak of its shape)"
	}
	if j.FloorBytes != nil {
		line("memory: declared %s, learned %s; at least %s, which an out-of-memory end of its shape proved it needs", sizeOrDash(j.DeclaredBytes), learned, plans.FormatSize(*j.FloorBytes))
	} else {
		line("memory: declared %s, learned %s", sizeOrDash(j.DeclaredBytes), learned)
	}
	if j.LearnedSeconds != nil {
		line("duration: learned %s (its shape's attempts that succeeded, %d of them)", learnedDuration(j.JobSummary), j.LearnedRuns)
	} else {
		line("duration: not learned yet (no attempt of its shape has succeeded)")
	}
	if j.UtilUnmeasured {
		line("utilization: counted as all of a card, not measured: its shape's attempts ended before a minute in, or NVML told none of theirs, and gpuq shares no card it cannot measure")
	} else if j.LearnedUtil != nil {
		line("utilization: learned %s of a card (its shape's attempts, %d of them); it shares a card while the jobs there keep no more busy than the sharing target",
			learnedUtil(j.JobSummary), j.LearnedUtilRuns)
	} else {
		line("utilization: not measured yet (its shape's first job is measured alone, a minute in)")
	}
	switch {
	case len(j.Attempts) == 0 && ended(j.State):
		line("no attempt: it %s before it started", state.JobState(j.State).Told())
		return
	case len(j.Attempts) == 0:
		line("no attempt yet; gpuq why %s says why it waits", j.ID)
		return
	}
	fmt.Fprintln(w)
	// On a narrow terminal, the start (the lines above say when the job ran), the
	// effective batch and the estimate give way, in that order.
	tw := newFitTable(w, width, 3).dropping(9, 4, 5)
	fmt.Fprintln(tw, "ATTEMPT\tGPU\tTIER\tCHANGED\tEFF. BATCH\tESTIMATE\tPEAK\tOUTCOME\tEXIT\tSTARTED\tTIME")
	for _, a := range j.Attempts {
		eb := "-"
		if a.EffectiveBatch != nil {
			eb = strconv.FormatInt(*a.EffectiveBatch, 10)
		}
		outcome := cmp.Or(a.Outcome, "running")
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, cardsOf(a), a.Tier, changedText(j.Params, a.Params),
			eb, sizeOrDash(a.EstimateBytes), sizeOrDash(peakOf(a)), outcome, exitText(a.ExitStatus), a.Started.Format("01-02 15:04:05"), durationOf(a, now))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, a := range j.Attempts {
		if a.Error != "" {
			line("attempt %d %s: %s", a.N, endedText(a.ExitStatus), a.Error)
		}
		// Whole, to be copied: a path or a command cut across lines would not be.
		fmt.Fprintf(w, "  log of attempt %d: %s\n", a.N, a.Log)
	}
	if len(j.Command) > 0 {
		fmt.Fprintf(w, "  command of attempt %d: %s\n", j.Attempts[len(j.Attempts)-1].N, shellQuote(j.Command))
	}
	printTraining(w, j.JobSummary)
}

// endedText says how an attempt's trainer ended: "exited with status 1", "was killed
// by SIGKILL".
func endedText(e api.ExitStatus) string {
	switch {
	case e.Signal != "":
		return "was killed by " + e.Signal
	case e.ExitCode != nil:
		return fmt.Sprintf("exited with status %d", *e.ExitCode)
	}
	return "ended"
}

// shellQuote writes argv as a shell would read it back: arguments with blanks or quotes
// between single quotes.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>(){}*?[]#~") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

type whyOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	json   bool
}

func newWhyCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &whyOptions{io: io, client: st.readClient}
	cmd := &cobra.Command{
		Use:   "why ID",
		Short: "Say why a queued job waits",
		Long: `Say why a queued job has not started, by its reason: no-slot (no free slot),
no-memory (not enough free memory on any card with a slot), would-slow (the cards with
room are busy enough that it would slow their jobs past the sharing target), unmeasured
(its shape's use of a card's compute is not measured yet, and no card is free enough to
run it at the guess it counts at, or each such card already runs a job not measured yet),
reserved (cards kept for a larger job ahead of it),
needs-idle (it runs alone and no card is idle), no-host-memory (not enough host RAM),
too-large (no card could hold it), no-card (a daemon with no cards of its own has no
worker linked); or that you hold it, that it is blocked until the
jobs it runs after succeed, or that it waits for its shape's probe. For a job that is
not queued, say what it is doing or how it ended (exit 0, as for one that waits); an
unknown job is exit 2.`,
		Example:           "  gpuq why gla-e1.12",
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE:              func(_ *cobra.Command, args []string) error { return runWhy(opts, args[0]) },
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"job","reason","detail"}`)
	return cmd
}

func runWhy(opts *whyOptions, id string) error {
	c, err := opts.client()
	if err != nil {
		return err
	}
	out, err := c.Why(id)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, out)
	}
	if out.Reason != "" {
		fmt.Fprintf(opts.io.Out, "%s waits (%s): %s\n", out.Job, out.Reason, out.Detail)
	} else {
		fmt.Fprintf(opts.io.Out, "%s: %s\n", out.Job, out.Detail)
	}
	return nil
}

type selectOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	verb   api.Verb
	done   string // what the verb did to the jobs, for people
	sweep  string
	where  string
	json   bool
}

// appliesTo says which jobs a verb acts on, where those selected had none of them:
// jobs held already are there, but not to hold.
var appliesTo = map[api.Verb]string{
	api.Hold:    " (it holds jobs that have not ended and are not held already; gpuq status shows their states)",
	api.Release: " (it releases held jobs; gpuq status shows their states)",
	api.Cancel:  " (it cancels jobs that have not ended; gpuq status shows their states)",
	api.Retry:   " (it retries failed, cancelled or stopped jobs; gpuq status shows their states)",
}

// newSelectCmd is a verb that acts on jobs named by id or on a whole sweep.
func newSelectCmd(io ioStreams, st *settings, verb api.Verb, short, done string) *cobra.Command {
	opts := &selectOptions{io: io, client: st.readClient, verb: verb, done: done}
	cmd := &cobra.Command{
		Use:   string(verb) + " ID...|--sweep SWEEP|--where KEY=VALUE,...",
		Short: short,
		Long: short + `.

Name jobs by id, or every job of a sweep with --sweep, or every job whose parameters
have the values --where gives (of that sweep, with --sweep): the jobs of a sweep or a
--where to which the verb does not apply are passed over. A named job to which it does
not apply is an error, and then nothing is changed.`,
		Example: fmt.Sprintf("  gpuq %s gla-e1.3 gla-e1.4\n  gpuq %s --sweep gla-e1\n  gpuq %s --sweep gla-e1 --where 'task=glue-sst2,seed=87|88'",
			verb, verb, verb),
		ValidArgsFunction: completeJobs(st),
		RunE:              func(_ *cobra.Command, args []string) error { return runSelect(opts, args) },
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "every job of this sweep")
	cmd.Flags().StringVar(&opts.where, "where", "", "every job whose parameters have these values: "+whereSyntax)
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"jobs":[...]}, the jobs changed`)
	return cmd
}

func runSelect(opts *selectOptions, ids []string) error {
	verb := opts.verb
	switch {
	case len(ids) > 0 && (opts.sweep != "" || opts.where != ""):
		return badInput("name jobs or give --sweep or --where, not both; see gpuq %s --help", verb)
	case len(ids) == 0 && opts.sweep == "" && opts.where == "":
		return badInput("name the jobs to %s (gpuq %s ID...), a sweep (--sweep SWEEP), or their parameters (--where task=sst2,seed=87)", verb, verb)
	}
	if _, err := plans.ParseWhere(opts.where); err != nil {
		return whereError(err)
	}
	c, err := opts.client()
	if err != nil {
		return err
	}
	changed, err := c.Act(verb, api.SelectRequest{IDs: ids, Sweep: opts.sweep, Where: opts.where})
	if err != nil {
		if len(changed) > 0 {
			// The daemon or a gpuq run acted before another failed: what it changed
			// stands, and is said; and a refusal then (a job of another that has ended
			// already) is no longer one of a command that changed nothing (exit 1,
			// not 2).
			slices.SortFunc(changed, byNumber)
			fmt.Fprintf(opts.io.Err, "gpuq: %s before the error below: %s\n", opts.done, strings.Join(changed, " "))
			return fmt.Errorf("%v", err)
		}
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, api.SelectResponse{Jobs: changed})
	}
	if len(changed) == 0 {
		fmt.Fprintf(opts.io.Out, "no job %s to %s%s\n", selectionText(opts.sweep, opts.where), verb, appliesTo[verb])
		return nil
	}
	slices.SortFunc(changed, byNumber)
	if len(changed) > namedAtMost {
		fmt.Fprintf(opts.io.Out, "%s (%s): %s\n", opts.done, plans.Count(len(changed), "job"), firstOf(changed, " "))
		return nil
	}
	fmt.Fprintf(opts.io.Out, "%s: %s\n", opts.done, strings.Join(changed, " "))
	return nil
}

// selectionText names the jobs --sweep and --where select, for people: "of gla-e1
// where seed=87".
func selectionText(sweep, where string) string {
	var parts []string
	if sweep != "" {
		parts = append(parts, "of "+sweep)
	}
	if where != "" {
		parts = append(parts, "where "+where)
	}
	return strings.Join(parts, " ")
}

type drainOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	on     bool
	json   bool
}

func newDrainCmd(io ioStreams, st *settings, on bool) *cobra.Command {
	verb, short := "drain", "Start no new job on a card; its running jobs finish"
	if !on {
		verb, short = "undrain", "Let a drained card take jobs again"
	}
	opts := &drainOptions{io: io, client: st.client, on: on}
	cmd := &cobra.Command{
		Use:   verb + " GPU",
		Short: short,
		Long: short + `. GPU is its index, as nvidia-smi numbers it; a worker's card is
WORKER:INDEX (node7:3). The daemon remembers it across restarts. A card of a
worker that is away (within its --worker-grace) may be drained or undrained, for
when it is back; a drained card may always be undrained.`,
		Example: "  gpuq " + verb + " 3\n  gpuq " + verb + " node7:3",
		Args: func(cmd *cobra.Command, args []string) error {
			// Given none, say what to give, as logs and cancel do, not cobra's count.
			if len(args) == 0 {
				return badInput("name the card to %s (gpuq %s 3), or a worker's (gpuq %s node7:3); gpuq gpus lists them", verb, verb, verb)
			}
			return exactArgs(1)(cmd, args)
		},
		ValidArgsFunction: completeCards(st),
		RunE:              func(_ *cobra.Command, args []string) error { return runDrain(opts, args[0]) },
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"gpu","on"}, and "worker" for a worker's card`)
	return cmd
}

func runDrain(opts *drainOptions, name string) error {
	card, err := plans.ParseCardID(name)
	if err != nil {
		return badInput("%v", err)
	}
	req := api.DrainRequest{Worker: card.Worker, GPU: card.Index, On: opts.on}
	c, err := opts.client()
	if err != nil {
		return err
	}
	if err := c.DrainCard(req); err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, req)
	}
	if opts.on {
		fmt.Fprintf(opts.io.Out, "GPU %s drained: no new job starts there; gpuq undrain %s undoes it\n", name, name)
	} else {
		fmt.Fprintf(opts.io.Out, "GPU %s takes jobs again\n", name)
	}
	return nil
}

// completeFlags completes the values of the flags of cmd and its subcommands that name
// job states (--state) or sweeps (--sweep, from the running daemon, if one answers).
func completeFlags(cmd *cobra.Command, st *settings) {
	if cmd.Flags().Lookup("state") != nil {
		cmd.RegisterFlagCompletionFunc("state", func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			// A list: running,q completes to running,queued.
			at := strings.LastIndexByte(prefix, ',') + 1
			given := strings.Split(prefix[:at], ",")
			var out []cobra.Completion
			for _, s := range shownStates {
				if !slices.Contains(given, string(s)) {
					out = append(out, prefix[:at]+string(s))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		})
	}
	if cmd.Flags().Lookup("sweep") != nil {
		cmd.RegisterFlagCompletionFunc("sweep", completeSweeps(st))
	}
	for _, c := range cmd.Commands() {
		completeFlags(c, st)
	}
}

// completeSweeps completes sweep names from the running daemon, if one answers.
func completeSweeps(st *settings) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		seen := map[string]int{}
		for _, j := range daemonStates(cmd, st) {
			sweep := sweepOfJob(j.ID)
			if seen[sweep]++; seen[sweep] == 1 && strings.HasPrefix(sweep, prefix) {
				out = append(out, sweep)
			}
		}
		for i, s := range out {
			out[i] = cobra.CompletionWithDesc(s, plans.Count(seen[s], "job"))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// daemonStates are the ids and states of the jobs of the running daemon and gpuq
// runs, for completion; none where nothing answers. Their ids and states alone: every
// job's history is 30 MB at 100,000 jobs.
func daemonStates(cmd *cobra.Command, st *settings) []api.JobState {
	if err := st.load(cmd.Root().PersistentFlags()); err != nil {
		return nil
	}
	c, err := st.client()
	if err != nil {
		return nil
	}
	jobs, _ := c.States(api.StatesRequest{})
	return jobs
}

// completeCards completes the cards drain and undrain name, from the running daemon if
// one answers: its own, by index, and its workers' as WORKER:INDEX, each described by
// its memory and whether it is drained.
func completeCards(st *settings) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || st.load(cmd.Root().PersistentFlags()) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := st.dial()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		info, _ := c.Info()
		cards := info.GPUs
		workers, _ := c.Workers() // none where it does not listen for workers
		for _, w := range workers {
			for _, g := range w.GPUs {
				g.Worker = w.Name
				cards = append(cards, g)
			}
		}
		var out []cobra.Completion
		for _, g := range cards {
			id := plans.CardID{Worker: g.Worker, Index: g.Index}.String()
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			desc := cmp.Or(cardSize(g), "memory not known yet") // as gpuq gpus lists a worker's cards
			if g.Drained {
				desc += ", drained"
			}
			out = append(out, cobra.CompletionWithDesc(id, desc))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeJobs completes job ids from the running daemon and gpuq runs, if one answers.
func completeJobs(st *settings) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, j := range daemonStates(cmd, st) {
			if strings.HasPrefix(j.ID, prefix) {
				out = append(out, cobra.CompletionWithDesc(j.ID, j.State))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
