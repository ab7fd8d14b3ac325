package api

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Notice is what a sweep's notify hooks get, as JSON: the event and the sweep, a line
// that says it, and for its end the sweep's summary (see EndNotice), for a failure the
// job that failed.
type Notice struct {
	Event string `json:"event"`
	Sweep string `json:"sweep"`
	// Text is the notice in a line, for people: chat services' webhooks (Slack's,
	// Mattermost's) show a payload's text.
	Text    string        `json:"text,omitempty"`
	Summary *SweepSummary `json:"summary,omitempty"`
	Job     *JobSummary   `json:"job,omitempty"`
}

// An end notice lists noticeJobs of its sweep's jobs at most, in noticeBytes of JSON at
// most: a sweep of thousands of jobs, a kilobyte or more each, would be megabytes, which
// chat services' webhooks refuse (Teams' above 28 KB) or cut (Slack's text at 40,000
// characters), so that the sweeps that matter most would be told nothing. It looks at
// noticeMisses jobs at most that do not fit: past them, as once what room is left is
// less than the smallest job listed, it lists no more, and summarizes no more either.
const (
	noticeJobs   = 20
	noticeBytes  = 16 << 10
	noticeMisses = 8
)

// EndNotice is the notice of a sweep's end, in a bounded size, whatever the sweep's:
// its counts by state, its time, and its jobs as many as noticeJobs and noticeBytes
// allow. Where they all fit, they are listed in submission order, as gpuq run --json
// prints them; where some are left out, those that did not succeed come first (failed,
// then cancelled or stopped early), then those that did, each group in submission
// order, and the summary says how many it left out. fetch is the command that lists
// every job (see Fetch). The sweep ended when its last job did, or, where none says, at
// ended: when the event that ended it was told, not when the notice is made, which may
// be minutes later behind a hook that hangs.
func EndNotice(view state.View, sweep string, cards []GPUInfo, fetch []string, ended time.Time) Notice {
	sum := SweepSummary{Sweep: sweep, Counts: noCounts(), GPUs: cards}
	jobs := SweepJobs(view, sweep)
	var last time.Time
	for _, j := range jobs {
		sum.Counts[string(j.ShownState())]++
		if j.Ended.After(last) {
			last = j.Ended
		}
	}
	if !last.IsZero() {
		ended = last
	}
	sum.Jobs = noticeList(view, jobs)
	sum.JobsLeftOut = len(jobs) - len(sum.Jobs)
	sum.Fetch = fetch
	sum.Ended = &ended
	if sub := view.Submission(sweep); sub != nil && !sub.Submitted.IsZero() {
		submitted, took := sub.Submitted, ended.Sub(sub.Submitted).Seconds()
		sum.Submitted, sum.DurationS = &submitted, &took
	}
	return Notice{Event: plans.NotifyEnd, Sweep: sweep, Text: endText(sum), Summary: &sum}
}

// noticeList is the jobs an end notice lists, of a sweep's jobs in submission order
// (see EndNotice). It summarizes noticeJobs+noticeMisses of them at most, however many
// the sweep has and however large their histories.
func noticeList(view state.View, jobs []*state.Job) []JobSummary {
	type listed struct {
		seq uint64
		js  JobSummary
	}
	ranked := slices.Clone(jobs)
	// Stable: submission order within each group.
	slices.SortStableFunc(ranked, func(a, b *state.Job) int { return cmp.Compare(noticeRank(a), noticeRank(b)) })
	var list []listed
	room, smallest, misses := noticeBytes, 0, 0
	for _, j := range ranked {
		if len(list) == noticeJobs || misses == noticeMisses || room < smallest {
			break
		}
		js := Summarize(view, j)
		data, err := json.Marshal(js)
		if err != nil || len(data) > room {
			misses++
			continue // one with a long history leaves room for the next
		}
		room -= len(data)
		if smallest == 0 || len(data) < smallest {
			smallest = len(data)
		}
		list = append(list, listed{j.Seq, js})
	}
	if len(list) == len(jobs) {
		// None left out: in submission order, as gpuq run --json lists them, for a
		// hook that reads them by their place.
		slices.SortFunc(list, func(a, b listed) int { return cmp.Compare(a.seq, b.seq) })
	}
	out := make([]JobSummary, len(list))
	for i, l := range list {
		out[i] = l.js
	}
	return out
}

// Fetch is the command an end notice names to print every job of a sweep, as
// {"jobs":[...]}, each as gpuq run --json prints it, of stateDir where it is not "":
// gpuq status --sweep S --json, of the daemon's sweeps. Of a gpuq run's (run), gpuq
// wait --sweep S --json: gpuq status reaches a run only while it serves (its hooks run
// before it exits), and refuses its sweep once it has exited, where gpuq wait reads
// the jobs the run left as it ended (it exits 1 where some job did not succeed).
func Fetch(sweep, stateDir string, run bool) []string {
	verb := "status"
	if run {
		verb = "wait"
	}
	fetch := []string{"gpuq", verb, "--sweep", sweep, "--json"}
	if stateDir != "" {
		fetch = append(fetch, "--state-dir", stateDir)
	}
	return fetch
}

// noticeRank orders an end notice's jobs: failed, then cancelled or stopped early, then
// the rest.
func noticeRank(j *state.Job) int {
	switch j.State {
	case state.JobFailed:
		return 0
	case state.JobSucceeded:
		return 2
	}
	return 1
}

// endText says a sweep's end in a line: gpuq: sweep gla ended after 2h3m: 998 succeeded,
// 2 failed (gla.17, gla.40).
func endText(sum SweepSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpuq: sweep %s ended", sum.Sweep)
	if sum.DurationS != nil {
		fmt.Fprintf(&b, " after %s", plans.FormatDuration(time.Duration(*sum.DurationS*float64(time.Second))))
	}
	sep := ": "
	for _, st := range []state.JobState{state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		if n := sum.Counts[string(st)]; n > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, n, st)
			sep = ", "
		}
	}
	var failed []string
	for _, js := range sum.Jobs {
		if js.State == string(state.JobFailed) {
			failed = append(failed, js.ID)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, " (%s", strings.Join(failed, ", "))
		if more := sum.Counts[string(state.JobFailed)] - len(failed); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString(")")
	}
	return b.String()
}

// FailureNotice is the notice of a job of a sweep that failed for good.
func FailureNotice(view state.View, j *state.Job) Notice {
	js := Summarize(view, j)
	text := fmt.Sprintf("gpuq: job %s of sweep %s failed", j.ID, j.Sweep)
	if why := failedWhy(js); why != "" {
		text += ": " + why
	}
	return Notice{Event: plans.NotifyFailure, Sweep: j.Sweep, Text: text, Job: &js}
}

// failedWhy is why a job failed, in a line of reasonable length: its latest attempt's
// error line, else its reason.
func failedWhy(js JobSummary) string {
	why := js.Reason
	if n := len(js.Attempts); n > 0 && js.Attempts[n-1].Error != "" {
		why = js.Attempts[n-1].Error
	}
	why = strings.Join(strings.Fields(why), " ")
	if r := []rune(why); len(r) > 300 {
		why = string(r[:299]) + "…"
	}
	return why
}
