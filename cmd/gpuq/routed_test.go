package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestWhereActsWhereverJobsRun: a --where of no sweep goes to the daemon and to every
// gpuq run, and gathers what each changed. Each refuses a key none of its jobs has:
// that is passed over where another knows it, and refused where none does, as the
// daemon alone would; any other error is an error.
func TestWhereActsWhereverJobsRun(t *testing.T) {
	refused := scheduler.Refused(`no job has a parameter "sede" (did you mean "seed"?)`)
	broken := errors.New("the run's socket closed")
	for _, tc := range []struct {
		name         string
		daemon, run  error
		want         []string
		wantRefusal  bool
		wantAnyError bool
	}{
		{name: "both have the key", want: []string{"d.1", "fg.1"}},
		{name: "only the run has it", daemon: refused, want: []string{"fg.1"}},
		{name: "none has it", daemon: refused, run: refused, wantRefusal: true},
		{name: "a run fails", run: broken, wantAnyError: true},
	} {
		d := &fakeDaemon{changed: []string{"d.1"}, refuse: tc.daemon}
		fg := &fakeDaemon{changed: []string{"fg.1"}, refuse: tc.run}
		r := &routed{daemon: d, runs: []ranSweep{{run: api.Run{Sweep: "fg"}, c: fg}}}
		sel := api.SelectRequest{Where: "seed=1"}
		got, err := r.Act(api.Hold, sel)
		var isRefusal scheduler.Refused
		switch {
		case tc.wantRefusal && !errors.As(err, &isRefusal):
			t.Errorf("%s: %v, want the refusal", tc.name, err)
		case tc.wantAnyError && err == nil:
			t.Errorf("%s: no error", tc.name)
		case !tc.wantRefusal && !tc.wantAnyError && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if len(d.acted) != 1 || len(fg.acted) != 1 || d.acted[0].Where != sel.Where || fg.acted[0].Where != sel.Where {
			t.Errorf("%s: the daemon was asked %+v, the run %+v; want the selection whole of each", tc.name, d.acted, fg.acted)
		}
	}
}

// TestNoJobOfAnyRunIsAnEmptyList: a listing gathered from the daemon and the runs that
// holds no job is {"jobs": []}, which gpuq status --json reads back, not null.
func TestNoJobOfAnyRunIsAnEmptyList(t *testing.T) {
	r := &routed{runs: []ranSweep{{run: api.Run{Sweep: "fg"}, c: &fakeDaemon{listings: [][]api.Job{{job("fg.1", "running")}}}}}}
	body, err := r.JobsJSON("", []string{"failed"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := indentJobs(&out, body); err != nil || !strings.Contains(out.String(), `"jobs": []`) {
		t.Errorf("no job of any run: %q %v", out.String(), err)
	}
	if got, err := r.States(api.StatesRequest{}); err != nil || got == nil {
		t.Errorf("the states of no job: %#v %v", got, err)
	}
}
