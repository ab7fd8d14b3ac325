package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestWait: gpuq wait polls until the jobs named, a sweep's, or every job the daemon
// has, have ended, says so once of a held one, and exits 0 only when every one
// succeeded, naming those that did not; an unknown job or sweep is bad input.
func TestWait(t *testing.T) {
	running := []api.Job{job("ok.1", "running"), job("one.1", "succeeded"), job("one.2", "held"), job("one.3", "queued")}
	later := []api.Job{job("ok.1", "running"), job("one.1", "succeeded"), job("one.2", "queued"), job("one.3", "running")}
	ended := []api.Job{job("ok.1", "succeeded"), job("one.1", "succeeded"), job("one.2", "failed"), job("one.3", "cancelled")}
	for _, tc := range []struct {
		name  string
		ids   []string
		sweep string
		code  int
		want  string
		held  int // how often it says that one.2 is held
	}{
		{"a sweep that succeeded", nil, "ok", exitOK, "1 job succeeded\n", 0},
		{"a job that succeeded", []string{"one.1"}, "", exitOK, "1 job succeeded\n", 0},
		{"a sweep that failed", nil, "one", exitFailed, "not every job succeeded: one.2 failed, one.3 cancelled", 1},
		{"every job", nil, "", exitFailed, "not every job succeeded: one.2 failed, one.3 cancelled", 1},
		{"an unknown job", []string{"one.9"}, "", exitBadInput, `no job "one.9"`, 0},
		{"an unknown sweep", nil, "nope", exitBadInput, `no sweep "nope"`, 0},
		{"both", []string{"one.1"}, "one", exitBadInput, "name jobs or give --sweep, not both", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{listings: [][]api.Job{running, running, later, ended}}
			ios, out, errb := buffers()
			code, msg := exitOf(runWait(&waitOptions{io: ios, client: d.client, sweep: tc.sweep}, tc.ids))
			if code != tc.code || !strings.Contains(out.String()+msg, tc.want) {
				t.Errorf("exit %d, %q %q; want %d and %q", code, out, msg, tc.code, tc.want)
			}
			if held := strings.Count(errb.String(), "one.2 is held: it waits until gpuq release one.2"); held != tc.held {
				t.Errorf("said %d times that one.2 is held, want %d: %q", held, tc.held, errb)
			}
		})
	}
}

// TestWaitAsksForTheJobsItWaitsFor: gpuq wait's polls cost the jobs it waits for, not
// every job of the daemon (it downloaded every job each poll: 70 s at 100,000 jobs);
// --json prints the jobs waited for with their histories, and no other.
func TestWaitAsksForTheJobsItWaitsFor(t *testing.T) {
	var others []api.Job
	for i := range 10_000 {
		others = append(others, job(fmt.Sprintf("big.%d", i+1), "succeeded"))
	}
	att := api.AttemptSummary{N: 1, Outcome: "success"}
	polls := [][]api.Job{
		append([]api.Job{job("w.1", "running"), job("w.2", "queued")}, others...),
		append([]api.Job{job("w.1", "succeeded", att), job("w.2", "running")}, others...),
		append([]api.Job{job("w.1", "succeeded", att), job("w.2", "running")}, others...),
		append([]api.Job{job("w.1", "succeeded", att), job("w.2", "succeeded", att)}, others...),
	}
	for _, tc := range []struct {
		name  string
		ids   []string
		sweep string
	}{
		{"jobs named", []string{"w.2", "w.1", "w.2"}, ""},
		{"a sweep", nil, "w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{listings: polls}
			ios, out, _ := buffers()
			if err := runWait(&waitOptions{io: ios, client: d.client, sweep: tc.sweep, json: true}, tc.ids); err != nil {
				t.Fatal(err)
			}
			// Both at first and at the first poll, then w.2 alone, then both with their
			// histories: a few times the jobs waited for.
			if d.told > 10 {
				t.Errorf("the daemon was asked for %d jobs to wait for 2", d.told)
			}
			var got api.JobsResponse
			if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Jobs) != 2 || got.Jobs[0].State != "succeeded" || len(got.Jobs[1].Attempts) != 1 {
				t.Errorf("--json printed %+v, want w.1 and w.2 with their attempts", got.Jobs)
			}
		})
	}
}

// TestWaitNamesAFewOfManyFailures: when many jobs did not succeed, gpuq wait names the
// first few, counts them by state and says how to list them all, instead of printing
// every id (2 MB at 100,000 failed jobs).
func TestWaitNamesAFewOfManyFailures(t *testing.T) {
	var jobs []api.Job
	for i := range 25 {
		st := "failed"
		if i%5 == 4 {
			st = "cancelled"
		}
		jobs = append(jobs, job(fmt.Sprintf("many.%d", i+1), st))
	}
	jobs = append(jobs, job("many.26", "succeeded"))
	d := &fakeDaemon{listings: [][]api.Job{jobs}}
	ios, _, _ := buffers()
	code, msg := exitOf(runWait(&waitOptions{io: ios, client: d.client, sweep: "many"}, nil))
	want := "not every job succeeded: many.1 failed, many.2 failed, many.3 failed, many.4 failed, many.5 cancelled, " +
		"many.6 failed, many.7 failed, many.8 failed, many.9 failed, many.10 cancelled, ... and 15 more " +
		"(5 cancelled, 20 failed; gpuq status --state cancelled,failed --sweep many lists them)"
	if code != exitFailed || msg != want {
		t.Errorf("exit %d, %q; want %d and %q", code, msg, exitFailed, want)
	}
}

// TestWaitSaysOnceThatManyAreHeld: jobs waited for that are held are told of in one
// line, a few of them named, not a line each (100,000 held jobs were 100,000 lines).
func TestWaitSaysOnceThatManyAreHeld(t *testing.T) {
	var held, ended []api.Job
	for i := range 25 {
		held = append(held, job(fmt.Sprintf("many.%d", i+1), "held"))
		ended = append(ended, job(fmt.Sprintf("many.%d", i+1), "succeeded"))
	}
	d := &fakeDaemon{listings: [][]api.Job{held, held, ended}}
	ios, _, errb := buffers()
	if err := runWait(&waitOptions{io: ios, client: d.client, sweep: "many"}, nil); err != nil {
		t.Fatal(err)
	}
	want := "gpuq: 25 jobs are held (many.1, many.2, many.3, many.4, many.5, many.6, many.7, many.8, many.9, many.10, ... and 15 more): they wait until gpuq release --sweep many\n"
	if errb.String() != want {
		t.Errorf("said %q, want %q", errb, want)
	}
}

// restarting is a daemon that does not answer its first down polls of States (a
// restart: nobody on the socket), and then answers as d does.
type restarting struct {
	*fakeDaemon
	down int
}

func (r *restarting) States(req api.StatesRequest) ([]api.JobState, error) {
	if r.down > 0 && len(req.IDs) > 0 { // the first call, which names the sweep, answers
		r.down--
		return nil, fmt.Errorf("gpuq daemon on /state: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT})
	}
	return r.fakeDaemon.States(req)
}

// TestWaitRidesThroughARestart: a daemon that stops answering while gpuq wait polls
// (it restarts) is asked again until it answers, and the wait ends as the jobs did;
// one that never answers again is given up after opts.gone, and a refusal at once.
// While it waits it says so in words, not with the socket's path and a URL.
func TestWaitRidesThroughARestart(t *testing.T) {
	running := []api.Job{job("r.1", "running")}
	ended := []api.Job{job("r.1", "succeeded")}
	for _, tc := range []struct {
		name      string
		down      int
		gone      time.Duration
		code      int
		want, err string
	}{
		{"a restart", 3, time.Minute, exitOK, "1 job succeeded\n", "the daemon answers again"},
		{"gone for good", 1 << 30, 50 * time.Millisecond, exitFailed, "no daemon answered for 50ms", "waiting up to 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &restarting{fakeDaemon: &fakeDaemon{listings: [][]api.Job{running, running, ended}}, down: tc.down}
			ios, out, errb := buffers()
			client := func() (daemonClient, error) { return r, nil }
			code, msg := exitOf(runWait(&waitOptions{io: ios, client: client, sweep: "r", poll: time.Millisecond, gone: tc.gone}, nil))
			if code != tc.code || !strings.Contains(out.String()+msg, tc.want) || !strings.Contains(errb.String(), tc.err) ||
				!strings.Contains(errb.String(), "gpuq: the daemon does not answer (stopped, or restarting); waiting") || strings.Contains(errb.String(), "/state") {
				t.Errorf("exit %d, %q %q, stderr %q; want %d, %q and %q", code, out, msg, errb, tc.code, tc.want, tc.err)
			}
		})
	}
	// A refusal is no restart: said at once.
	d := &fakeDaemon{listings: [][]api.Job{running}, refuse: scheduler.Refused("no such job")}
	ios, _, errb := buffers()
	opts := &waitOptions{io: ios, client: d.client, sweep: "r", poll: time.Millisecond, gone: time.Minute}
	if _, _, err := pollAgain(opts, d, []string{"r.1"}); err == nil || errb.String() != "" {
		t.Errorf("a refusal: %v, stderr %q; want it at once", err, errb)
	}
}

// TestWaitForARunStarting: while a gpuq run of the sweep waited for is starting (it
// holds the sweep's name, and serves it not yet), gpuq wait asks again until it
// answers, and follows it; with none starting, a sweep nothing has is refused at once.
func TestWaitForARunStarting(t *testing.T) {
	noSweep := noRunOf{dir: "/state", sweep: "r", nothingLeft: true}
	run := &fakeDaemon{listings: [][]api.Job{{job("r.1", "running")}, {job("r.1", "succeeded")}}}
	asked, startingFor := 0, 3
	client := func() (daemonClient, error) {
		asked++
		if asked <= startingFor {
			return nil, noSweep
		}
		return run, nil
	}
	starting := func(sweep string) bool { return sweep == "r" && asked <= startingFor }
	ios, out, _ := buffers()
	code, msg := exitOf(runWait(&waitOptions{io: ios, client: client, sweep: "r", poll: time.Millisecond, gone: time.Minute, starting: starting}, nil))
	if code != exitOK || out.String() != "1 job succeeded\n" || asked <= startingFor {
		t.Errorf("a run starting: exit %d (%s), %q, asked %d times; want it followed to its end", code, msg, out, asked)
	}
	asked, startingFor = 0, 1
	ios, _, _ = buffers()
	code, _ = exitOf(runWait(&waitOptions{io: ios, client: client, sweep: "r", poll: time.Millisecond, gone: time.Minute,
		starting: func(string) bool { return false }}, nil))
	if code != exitBadInput || asked != 1 {
		t.Errorf("none starting: exit %d after %d asks; want 2 at once", code, asked)
	}
}

// TestWaitForADaemonAfterAStop: gpuq wait that finds no daemon because the last one
// stopped less than opts.gone before (a restart: systemd's, an upgrade's) with the jobs
// not all ended waits for one to answer, as it waits for one that restarts while it
// polls; where the last one stopped longer ago, or said nothing (killed), it fails
// at once, as no daemon runs for jobs that have not ended.
func TestWaitForADaemonAfterAStop(t *testing.T) {
	none := api.NoDaemonError{Dir: "/state", Stopped: 42, At: time.Now().Add(-time.Second), Need: "to run the jobs waited for"}
	for _, tc := range []struct {
		name    string
		stopped time.Duration // how long ago; 0: none said so
		code    int
		asked   int // how often it asks for a daemon, at most
	}{
		{"just stopped", time.Second, exitOK, 1 << 30},
		{"stopped long ago", time.Hour, exitFailed, 1},
		{"killed", 0, exitFailed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{listings: [][]api.Job{{job("r.1", "running")}, {job("r.1", "succeeded")}}}
			asked := 0
			client := func() (daemonClient, error) {
				if asked++; asked <= 3 {
					return nil, none
				}
				return d, nil
			}
			stopped := func() (int, time.Time, bool) { return 42, time.Now().Add(-tc.stopped), tc.stopped != 0 }
			ios, out, errb := buffers()
			code, msg := exitOf(runWait(&waitOptions{io: ios, client: client, sweep: "r", poll: time.Millisecond, gone: time.Minute, stopped: stopped}, nil))
			if code != tc.code || asked > tc.asked {
				t.Errorf("exit %d (%s), %q, %q, asked %d times; want %d", code, msg, out, errb, asked, tc.code)
			}
			if code == exitFailed && (msg != none.Error() || errb.String() != "") {
				t.Errorf("said %q, then %q; want %q alone", errb, msg, none.Error())
			}
		})
	}
}

// TestWaitReadsTheStateOnceTheDaemonEnds: gpuq wait whose daemon stops as it polls
// reads the state the daemon left once it has ended: jobs that had all ended there
// (they succeeded as it stopped; --stop-trainers cancelled them) are as they ended,
// without waiting for a daemon to come back, nor saying that one did.
func TestWaitReadsTheStateOnceTheDaemonEnds(t *testing.T) {
	// The daemon answers the first ask, for the sweep, and then stops answering.
	stops := &restarting{fakeDaemon: &fakeDaemon{listings: [][]api.Job{{job("r.1", "running")}}}, down: 1 << 30}
	left := &fakeDaemon{listings: [][]api.Job{{job("r.1", "succeeded")}}}
	asked, read := 0, 0
	client := func() (daemonClient, error) {
		if asked++; asked == 1 {
			return stops, nil
		}
		return nil, api.NoDaemonError{Dir: "/state"}
	}
	ios, out, errb := buffers()
	code, msg := exitOf(runWait(&waitOptions{io: ios, client: client, sweep: "r", poll: time.Millisecond, gone: time.Minute,
		read: func() (daemonClient, error) { read++; return left, nil }}, nil))
	if code != exitOK || out.String() != "1 job succeeded\n" || read != 1 || strings.Contains(errb.String(), "answers again") {
		t.Errorf("exit %d (%s), %q, said %q, the state read %d times; want 0, 1 job succeeded, read once, no daemon said to answer", code, msg, out, errb, read)
	}
}
