package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestCleanForgetsWhatARunLeft: gpuq clean forgets what a gpuq run of a sweep left as it
// ended (which gpuq results reads by the sweep's name) as it forgets the daemon's
// ended sweeps, with no daemon running: --sweep that sweep's alone, --older-than
// those that ended longer ago, and --all every one; with none of them it forgets
// nothing and says how to name what to forget. A sweep none left is no sweep to
// clean, as a daemon would say, not that no daemon runs.
func TestCleanForgetsWhatARunLeft(t *testing.T) {
	dir := daemonEnv(t)
	left := func(sweep string, pid int, ended time.Time) api.Run { return leaveRecord(t, dir, sweep, pid, ended) }
	now := time.Now()
	fg, fg2, old, other := left("fg", 4242, now.Add(-time.Hour)), left("fg", 4343, now), left("old", 4444, now.Add(-10*24*time.Hour)), left("other", 4545, now)
	// A record that says when its run ended ended then, whenever its file was last
	// modified: copied without the times, or restored with older ones.
	says := func(sweep string, pid int, ended, touched time.Time) api.Run {
		return leaveRecord(t, dir, sweep, pid, touched, ended)
	}
	copied, restored := says("copied", 4646, now.Add(-10*24*time.Hour), now), says("restored", 4747, now, now.Add(-10*24*time.Hour))
	kept := func(r api.Run) bool { _, err := os.Stat(r.Record()); return err == nil }

	readsRun := func() bool {
		_, errOut, _ := cli(t, "results", "fg")
		return strings.Contains(errOut, "fg is read from what the gpuq run of fg")
	}
	if !readsRun() {
		t.Fatal("results of fg before clean do not read what its run left")
	}
	none := func(sweep, hint string) {
		t.Helper()
		want := `no sweep "` + sweep + `" to clean` + hint + ": no gpuq daemon runs on " + dir + ", nor left its state there, and no gpuq run of it left its jobs there as it ended"
		if out, errOut, code := cli(t, "clean", "--sweep", sweep); code != exitBadInput || !strings.Contains(errOut, want) {
			t.Errorf("clean --sweep %s: exit %d: %s%s\nwant exit %d and %q", sweep, code, out, errOut, exitBadInput, want)
		}
	}
	none("othr", ` (did you mean "other"?)`)
	live, err := launcher.ListenUnix(api.RunSocket(dir, "live", os.Getpid())) // however long the path
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if out, errOut, code := cli(t, "clean", "--sweep", "live"); code != exitBadInput || !strings.Contains(errOut, fmt.Sprintf("sweep live is run by gpuq run (pid %d), which has not ended", os.Getpid())) {
		t.Errorf("clean --sweep live, which a gpuq run runs: exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code := cli(t, "clean", "--sweep", "fg")
	if code != exitOK || !strings.Contains(out, "fg (pid 4242), fg (pid 4343)") {
		t.Errorf("clean --sweep fg: exit %d: %s%s", code, out, errOut)
	}
	if kept(fg) || kept(fg2) || !kept(old) || !kept(other) {
		t.Errorf("after clean --sweep fg, fg's records kept: %v %v, old's: %v, other's: %v; want fg's alone gone", kept(fg), kept(fg2), kept(old), kept(other))
	}
	if readsRun() {
		t.Error("results of fg once clean forgot it still read what its run left")
	}
	none("fg", "")

	if out, errOut, code := cli(t, "clean", "--older-than", "7d"); code != exitOK || kept(old) || !kept(other) || kept(copied) || !kept(restored) {
		t.Errorf("clean --older-than 7d: exit %d: %s%s; old's record kept: %v, other's: %v, copied's (ended 10d ago, modified now): %v, restored's (ended now, modified 10d ago): %v",
			code, out, errOut, kept(old), kept(other), kept(copied), kept(restored))
	}
	// Nothing old enough, no daemon, and none ever ran here: nothing to forget, not
	// a failure (a nightly clean of someone who only uses gpuq run).
	if out, errOut, code := cli(t, "clean", "--older-than", "7d"); code != exitOK || !strings.Contains(out, "no sweep to forget: none ended more than 7d ago") || !kept(other) {
		t.Errorf("clean --older-than 7d, nothing that old: exit %d: %s%s; other's record kept: %v", code, out, errOut, kept(other))
	}
	// Every sweep's records and logs at once is asked for by name, not by a word
	// left out.
	for _, args := range [][]string{{"clean"}, {"clean", "--logs"}} {
		if out, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, nameWhatToClean) || !kept(other) || !kept(restored) {
			t.Errorf("%v: exit %d: %s%s; other's record kept: %v, restored's: %v; want exit %d, %q and both kept",
				args, code, out, errOut, kept(other), kept(restored), exitBadInput, nameWhatToClean)
		}
	}
	if out, errOut, code := cli(t, "clean", "--all", "--sweep", "other"); code != exitBadInput || !strings.Contains(errOut, "--all and --sweep: give one") || !kept(other) {
		t.Errorf("clean --all --sweep other: exit %d: %s%s; other's record kept: %v", code, out, errOut, kept(other))
	}
	if out, errOut, code := cli(t, "clean", "--all"); code != exitOK || kept(other) || kept(restored) {
		t.Errorf("clean --all: exit %d: %s%s; other's record kept: %v, restored's: %v", code, out, errOut, kept(other), kept(restored))
	}
	if out, errOut, code := cli(t, "clean", "--all"); code != exitOK || !strings.Contains(out, "no sweep to forget") {
		t.Errorf("clean --all of nothing left: exit %d: %s%s", code, out, errOut)
	}
}

// leaveRecord leaves in the state directory what a gpuq run of sweep (pid) leaves as
// it ends, one job that succeeded, its file last modified at touched; where ended is
// given, the record says that the run ended then.
func leaveRecord(t *testing.T, dir, sweep string, pid int, touched time.Time, ended ...time.Time) api.Run {
	t.Helper()
	if err := os.MkdirAll(api.RunsDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	says := ""
	for _, at := range ended {
		says = `"ended":"` + at.Format(time.RFC3339Nano) + `",`
	}
	r := api.Run{Sweep: sweep, PID: pid, Socket: api.RunSocket(dir, sweep, pid)}
	err := r.WriteRecord(func(w io.Writer) error {
		_, err := io.WriteString(w, `{`+says+`"jobs":[{"sweep":"`+sweep+`","id":"`+sweep+`.1","state":"succeeded","attempts":[]}]}`)
		return err
	})
	if err == nil {
		err = os.Chtimes(r.Record(), touched, touched)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCleanWithoutADaemonSaysWhatItLeft: with no daemon running, gpuq clean forgets
// what the gpuq runs that had ended left, but not the sweeps the last daemon left,
// which a daemon forgets; whatever it was asked (--all, --older-than, --sweep), where
// that state holds what was asked it says that those sweeps are not forgotten and how
// to start a daemon to forget them, and exits 1, whether or not a run's record was
// forgotten beside them. It once exited 0 having forgotten a record, saying nothing
// of the daemon's sweeps it left, and failed only once no record was left, so the
// same clean read as done the first time and failed the second. Started, a daemon
// forgets them.
func TestCleanWithoutADaemonSaysWhatItLeft(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	sweep := writeSweep(t, "name: ok\ncommand: [sh, -c, \"echo out\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "ok.1 to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
	stopAll(t, dir)
	_, at, _, _ := api.Stopped(dir)
	start := fmt.Sprintf("the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon to clean sweeps", dir, os.Getpid(), at.Local().Format(time.DateTime))
	kept := func(r api.Run) bool { _, err := os.Stat(r.Record()); return err == nil }
	hour := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		args []string
		run  string // the sweep of the run whose record is left beforehand
		want string
	}{
		{[]string{"clean", "--all"}, "runone", "the sweeps the last gpuq daemon left are not forgotten (ok; gpuq status lists them): " + start},
		{[]string{"clean", "--older-than", "1ms"}, "runone", "the sweeps the last gpuq daemon left are not forgotten (ok; gpuq status lists them): " + start},
		{[]string{"clean", "--sweep", "ok"}, "ok", "sweep ok, which the last gpuq daemon left, is not forgotten: " + start},
	} {
		// First with a run's record to forget beside the daemon's sweep, then with
		// none left: the same failure, and the same words, both times.
		r := leaveRecord(t, dir, tc.run, 4242, hour)
		for _, record := range []bool{true, false} {
			out, errOut, code := cli(t, tc.args...)
			forgot := strings.Contains(out, "forgot the jobs of the gpuq runs that had ended, as they left them: "+tc.run+" (pid 4242)")
			if code != exitFailed || !strings.Contains(errOut, tc.want) || forgot != record || kept(r) {
				t.Errorf("gpuq %s (a run's record to forget: %v): exit %d, record kept: %v:\n%s%s\nwant exit %d, %q, and the record forgotten and said so where there was one",
					strings.Join(tc.args, " "), record, code, kept(r), out, errOut, exitFailed, tc.want)
			}
		}
	}
	// A sweep submitted within --older-than cannot have ended before it: a daemon
	// would not forget it either, and a nightly clean does not fail for it.
	if out, errOut, code := cli(t, "clean", "--older-than", "7d"); code != exitOK || strings.Contains(errOut, "not forgotten") {
		t.Errorf("clean --older-than 7d of a sweep submitted just now: exit %d: %s%s", code, out, errOut)
	}
	if jobs := listed(t); countState(jobs, "succeeded") != 1 {
		t.Errorf("the last daemon's sweep after the cleans without one: %+v", jobs)
	}
	startDaemon(t)
	if out, errOut, code := cli(t, "clean", "--all"); code != exitOK || !strings.Contains(out, "forgot ok (1 job)") {
		t.Errorf("clean --all with a daemon: exit %d: %s%s", code, out, errOut)
	}
}

// nameWhatToClean is what gpuq clean says when it is not told what to forget.
const nameWhatToClean = "name the sweeps to forget: one (gpuq clean --sweep SWEEP), those that ended longer ago (--older-than 7d), or every one that has ended (--all)"
