package main

import (
	"errors"
	"slices"
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
