package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
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

// TestWhereRefusedSaysWhatTheJobsHave: a --where that the daemon and a gpuq run both
// refuse is refused in the words of the one whose jobs have its key, with the values
// they have, not of the one whose jobs lack the key, whoever is asked first.
func TestWhereRefusedSaysWhatTheJobsHave(t *testing.T) {
	key := scheduler.Refused(`no job has a parameter "x" (did you mean "y"?)`)
	values := scheduler.Refused("no job has x=9 (its x: 1, 2)")
	for _, tc := range []struct{ daemon, run error }{{key, values}, {values, key}} {
		r := &routed{daemon: &fakeDaemon{refuse: tc.daemon}, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: &fakeDaemon{refuse: tc.run}}}}
		if _, err := r.Act(api.Cancel, api.SelectRequest{Where: "x=9"}); err == nil || err.Error() != values.Error() {
			t.Errorf("the daemon refusing %q, the run %q: %v; want %q", tc.daemon, tc.run, err, values)
		}
	}
	r := &routed{daemon: &fakeDaemon{refuse: key}, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: &fakeDaemon{refuse: key}}}}
	if _, err := r.Act(api.Cancel, api.SelectRequest{Where: "x=9"}); err == nil || err.Error() != key.Error() {
		t.Errorf("both lacking the key: %v; want %q", err, key)
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

// leftState is the state a stopped daemon left on dir with these sweeps submitted
// (their jobs queued), as readClient reads it.
func leftState(t *testing.T, dir string, sweeps ...string) *stateReader {
	t.Helper()
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range sweeps {
		sw, err := plans.DecodeSweep("/sweeps/left.yaml", []byte(doc), plans.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Submit(&state.Submission{Sweep: sw}); err != nil {
			t.Fatal(err)
		}
	}
	return &stateReader{view: store.View(), none: api.NoDaemonError{Dir: dir}}
}

// TestTheLeftStateAnswersBeforeARunActs: cancel, hold... of jobs of a gpuq run and of
// the state a stopped daemon left changes nothing where the state refuses one (an
// unknown job, exit 2) or needs a daemon for one (exit 1), in whatever order they are
// named: the state answers first. A gpuq run's jobs alone are changed.
func TestTheLeftStateAnswersBeforeARunActs(t *testing.T) {
	sr := leftState(t, "/state", "name: qs2\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1, 2]}\n")
	for _, tc := range []struct {
		ids  []string
		code int
		text string
	}{
		{[]string{"long.1", "qs2.99"}, exitBadInput, `no job "qs2.99": sweep qs2 has jobs qs2.1 to qs2.2`},
		{[]string{"qs2.99", "long.1"}, exitBadInput, `no job "qs2.99"`},
		{[]string{"long.1", "qs2.1"}, exitFailed, "no gpuq daemon runs on /state"},
		{[]string{"long.1"}, exitOK, ""},
	} {
		run := &fakeDaemon{changed: []string{"long.1"}, listings: [][]api.Job{{job("long.1", "running")}}}
		r := &routed{dir: "/state", daemon: sr, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: run}}}
		changed, err := r.Act(api.Cancel, api.SelectRequest{IDs: tc.ids})
		code, text := exitOf(err)
		if code != tc.code || !strings.Contains(text, tc.text) {
			t.Errorf("cancel %v: exit %d, %q; want %d, %q", tc.ids, code, text, tc.code, tc.text)
		}
		if acted := len(run.acted) > 0; acted != (tc.code == exitOK) || acted != (len(changed) > 0) {
			t.Errorf("cancel %v: the run was asked %+v, and %v changed; want it asked only where nothing fails", tc.ids, run.acted, changed)
		}
	}
}

// TestWhatWasChangedBeforeAnErrorIsSaid: where a gpuq run changed jobs before the
// daemon failed on one named with them, or refused it (it has ended already), gpuq
// cancel says what it changed, then the error, and exits 1: exit 2 says that nothing
// was changed.
func TestWhatWasChangedBeforeAnErrorIsSaid(t *testing.T) {
	for _, actErr := range []error{errors.New("the daemon stopped answering"), scheduler.Refused("d.9 succeeded: it has ended already")} {
		run := &fakeDaemon{changed: []string{"long.1"}, listings: [][]api.Job{{job("long.1", "running")}}}
		d := &fakeDaemon{actErr: actErr, listings: [][]api.Job{{job("d.9", "running")}}}
		r := &routed{dir: "/state", daemon: d, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: run}}}
		var out, errOut strings.Builder
		opts := &selectOptions{io: ioStreams{Out: &out, Err: &errOut}, client: func() (daemonClient, error) { return r, nil }, verb: api.Cancel, done: "cancelled"}
		err := runSelect(opts, []string{"long.1", "d.9"})
		if code, text := exitOf(err); code != exitFailed || text != actErr.Error() || !strings.Contains(errOut.String(), "cancelled before the error below: long.1") {
			t.Errorf("cancel long.1 d.9, the daemon answering %q: exit %d (%v); want 1, and long.1 said cancelled:\n%s%s", actErr, code, err, out.String(), errOut.String())
		}
	}
}

// TestAJobNobodyHasChangesNothing: cancel, hold... of jobs of a gpuq run and of the
// daemon that runs, one of which neither has, is refused (exit 2) before any is
// changed, in whatever order they are named: the one that does not know it says so.
func TestAJobNobodyHasChangesNothing(t *testing.T) {
	for _, ids := range [][]string{{"long.1", "d.9"}, {"d.9", "long.1"}, {"d.1", "long.7"}, {"long.7", "d.1"}} {
		run := &fakeDaemon{changed: []string{"long.1"}, listings: [][]api.Job{{job("long.1", "running")}}}
		d := &fakeDaemon{changed: []string{"d.1"}, listings: [][]api.Job{{job("d.1", "running")}}}
		r := &routed{dir: "/state", daemon: d, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: run}}}
		changed, err := r.Act(api.Cancel, api.SelectRequest{IDs: ids})
		unknown := ids[slices.IndexFunc(ids, func(id string) bool { return id != "long.1" && id != "d.1" })]
		if code, text := exitOf(err); code != exitBadInput || !strings.Contains(text, `no job "`+unknown+`"`) {
			t.Errorf("cancel %v: exit %d, %q; want 2 and %s unknown", ids, code, text, unknown)
		}
		if len(run.acted)+len(d.acted) > 0 || len(changed) > 0 {
			t.Errorf("cancel %v: the run was asked %+v and the daemon %+v, %v changed; want nothing asked", ids, run.acted, d.acted, changed)
		}
	}
	// Named of one alone, a job is the daemon's or the run's to refuse, as it does.
	d := &fakeDaemon{refuse: scheduler.NoJob("d.9", []string{"d.1"})}
	r := &routed{dir: "/state", daemon: d, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: &fakeDaemon{}}}}
	if _, err := r.Act(api.Cancel, api.SelectRequest{IDs: []string{"d.9"}}); len(d.acted) != 1 || err == nil {
		t.Errorf("cancel d.9: the daemon was asked %+v (%v); want it asked once, and its refusal", d.acted, err)
	}
}

// TestWhereAsksTheLeftStateFirst: a --where of no sweep beside the state a stopped
// daemon left is answered by that state first: where jobs of it meet the --where, no
// daemon runs to change them (exit 1), and no gpuq run's job is changed either; where
// none does, the runs' jobs are changed, and where the runs' refuse it too, a refusal
// stands (exit 2; the state's, which answers first, unless it lacks the key the runs'
// jobs have: see TestWhereRefusedSaysWhatTheJobsHave). A --where of the state's sweep
// is refused as the daemon would refuse it where none of its jobs meets it.
func TestWhereAsksTheLeftStateFirst(t *testing.T) {
	sr := leftState(t, "/state", "name: qs2\ncommand: [sh, -c, 'true']\nmatrix: {task: [rte, sst2], seed: [1]}\n")
	other := scheduler.Refused("no job has task=rte (its task: cola)")
	for _, tc := range []struct {
		sel  api.SelectRequest
		run  error // the run's answer
		code int
		text string
	}{
		{api.SelectRequest{Where: "task=rte"}, other, exitFailed, "no gpuq daemon runs on /state"},
		{api.SelectRequest{Where: "task=rte"}, nil, exitFailed, "nothing was changed (gpuq retry --sweep SWEEP --where task=rte"},
		{api.SelectRequest{Where: "task=cola"}, nil, exitOK, ""},
		{api.SelectRequest{Where: "task=mnli"}, other, exitBadInput, "no job has task=mnli (its task: rte, sst2)"},
		{api.SelectRequest{Where: "tsk=rte"}, scheduler.Refused(`no job has a parameter "tsk" (did you mean "task"?)`), exitBadInput, `no job has a parameter "tsk" (did you mean "task"?)`},
		{api.SelectRequest{Sweep: "qs2", Where: "task=cola"}, nil, exitBadInput, "sweep qs2: no job has task=cola (its task: rte, sst2)"},
		{api.SelectRequest{Sweep: "qs2", Where: "task=rte"}, nil, exitFailed, "no gpuq daemon runs on /state"},
	} {
		run := &fakeDaemon{changed: []string{"long.1"}, refuse: tc.run}
		r := &routed{dir: "/state", daemon: sr, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: run}}}
		changed, err := r.Act(api.Hold, tc.sel)
		code, text := exitOf(err)
		if code != tc.code || !strings.Contains(text, strings.ReplaceAll(tc.text, "gpuq retry", "gpuq hold")) {
			t.Errorf("hold %+v: exit %d, %q; want %d, %q", tc.sel, code, text, tc.code, tc.text)
		}
		if code == exitFailed && (len(run.acted) > 0 || len(changed) > 0) {
			t.Errorf("hold %+v: the run was asked %+v, and %v changed, though no daemon runs for the state's", tc.sel, run.acted, changed)
		}
	}
	// The state's jobs that meet it are none a retry changes (they are queued): a
	// daemon started would change none of them, so they keep nothing from the run's,
	// and the where is met, not refused, whatever the run says.
	for _, tc := range []struct {
		run     error
		changed []string
	}{{nil, []string{"long.1"}}, {other, nil}} {
		run := &fakeDaemon{changed: []string{"long.1"}, refuse: tc.run}
		r := &routed{dir: "/state", daemon: sr, runs: []ranSweep{{run: api.Run{Sweep: "long"}, c: run}}}
		changed, err := r.Act(api.Retry, api.SelectRequest{Where: "task=rte"})
		if err != nil || !slices.Equal(changed, tc.changed) {
			t.Errorf("retry --where task=rte, the run answering %v: %v changed, %v; want %v and no error", tc.run, changed, err, tc.changed)
		}
	}
}
