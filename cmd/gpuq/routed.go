package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// routed is the daemon of a state directory and the gpuq runs that serve their sweeps
// there (see api.Runs), as one client: a job goes to whoever runs its sweep (its id is
// "<sweep>.<n>"), a sweep likewise, and a listing of every job gathers them all. So
// gpuq status, logs, attach, why, cancel... work against a gpuq run in the foreground
// as against the daemon, with nothing more to name than the job or the sweep.
type routed struct {
	dir string
	// daemon is the daemon's client; for the verbs that only read, where none runs, the
	// state its last one left (see readClient); nil when there is neither.
	daemon daemonClient
	runs   []ranSweep
	// nothingLeft: no daemon runs on dir, nor did one leave its state there (readClient
	// looked), so a sweep no gpuq run runs is nowhere there.
	nothingLeft bool
	// unread: no daemon runs on dir, and the state its last one left cannot be read
	// (readClient looked): the answer for a sweep that no gpuq run runs, and for a
	// listing of every job, but not for a run's.
	unread error
	// none is where no daemon answers, the verb's word for it (see settings.noDaemon):
	// which daemon stopped there last, and when, and what starts one for the verb.
	none api.NoDaemonError
}

// ranSweep is a gpuq run's client, for its sweep.
type ranSweep struct {
	run api.Run
	c   daemonClient
}

// routedClient connects to the daemon and to every gpuq run of the state directory.
// With no run it is the daemon's client alone, or NoDaemonError when none answers.
func (s *settings) routedClient() (daemonClient, error) {
	c, err := s.dial()
	var none api.NoDaemonError
	if s.remote() || err != nil && !errors.As(err, &none) {
		return c, err // over the network, a daemon's alone
	}
	dir, derr := s.stateDir()
	if derr != nil {
		return nil, derr
	}
	r := &routed{dir: dir, none: none}
	if err == nil {
		r.daemon = c
	}
	for _, run := range api.Runs(dir) {
		if rc, err := api.DialRun(dir, run); err == nil {
			r.runs = append(r.runs, ranSweep{run, rc})
		}
	}
	switch {
	case len(r.runs) > 0:
		return r, nil
	case err != nil:
		return nil, err
	}
	return c, nil
}

// sweepOfJob is the sweep of a job id: what comes before its last dot.
func sweepOfJob(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		return id[:i]
	}
	return id
}

// byNumber orders job ids as people count them, by sweep and then by number: s.2
// before s.10.
func byNumber(a, b string) int {
	sa, sb := sweepOfJob(a), sweepOfJob(b)
	if c := strings.Compare(sa, sb); c != 0 {
		return c
	}
	na, nb := strings.TrimPrefix(a, sa), strings.TrimPrefix(b, sb)
	return cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb))
}

// to is whoever runs a sweep: its gpuq run, or the daemon.
func (r *routed) to(sweep string) (daemonClient, error) {
	var ran []api.Run
	var c daemonClient
	for _, rs := range r.runs {
		if rs.run.Sweep == sweep {
			ran, c = append(ran, rs.run), rs.c
		}
	}
	switch {
	case len(ran) > 1:
		return nil, fmt.Errorf("%d gpuq runs run sweep %s (%s): gpuq cannot tell which you mean; stop all but one",
			len(ran), sweep, api.RunsText(ran))
	case c != nil:
		return c, nil
	case r.daemon != nil:
		return r.daemon, nil
	case r.unread != nil:
		return nil, r.unread
	case r.nothingLeft:
		if e, ok := endedRunIn(r.dir, sweep); ok {
			return nil, e
		}
	}
	return nil, noRunOf{dir: r.dir, sweep: sweep, runs: r.allRuns(), nothingLeft: r.nothingLeft}
}

// toJob is whoever runs a job's sweep (see to); where nothing does, the error names
// the job.
func (r *routed) toJob(id string) (daemonClient, error) {
	c, err := r.to(sweepOfJob(id))
	switch e := err.(type) {
	case noRunOf:
		e.job = id
		return nil, e
	case endedRunOf:
		e.job = id
		return nil, e
	}
	return c, err
}

// endedRunOf is a sweep, or a job of it, that neither a daemon nor a gpuq run of a state
// directory runs, nor the state a daemon left there has, but whose gpuq run has ended
// there and left its jobs as they ended (see api.Run.Record): gpuq results and report
// read them, and a verb that asks a daemon or a run has nothing to ask. That is
// refused as an unknown job or sweep is (exit 2), saying where to read it.
type endedRunOf struct {
	dir, sweep string
	job        string // the job asked for; "" for the sweep
	// stateLeft: a daemon left its state on dir, which does not have the sweep.
	stateLeft bool
}

// endedRunIn is sweep as endedRunOf, where a gpuq run of it ended on dir and left its
// record; false where none did.
func endedRunIn(dir, sweep string) (endedRunOf, bool) {
	return endedRunOf{dir: dir, sweep: sweep}, slices.Contains(api.EndedSweeps(dir), sweep)
}

// noneNamed is how a refusal of a sweep, or of a job of it (job; "": the sweep)
// begins, as the daemon's own do (see scheduler.NoJob and NoSweep).
func noneNamed(sweep, job string) string {
	if job != "" {
		return fmt.Sprintf("no job %q", job)
	}
	return fmt.Sprintf("no sweep %q", sweep)
}

func (e endedRunOf) Error() string {
	left := "nor did one leave jobs there"
	if e.stateLeft {
		left = "and the state the last one left there has no sweep " + e.sweep
	}
	return fmt.Sprintf("%s: the gpuq run of sweep %s has ended (no gpuq daemon runs on %s, %s): gpuq results %s and gpuq report %s read the jobs that run left as it ended",
		noneNamed(e.sweep, e.job), e.sweep, e.dir, left, e.sweep, e.sweep)
}

// Unwrap makes it a refusal (exit 2), as of an unknown job or sweep.
func (e endedRunOf) Unwrap() error { return scheduler.Refused(e.Error()) }

// leftJob is job id as the gpuq run of its sweep that ended last left it (see
// api.LastEnded), and when that run ended; false where its record has no such job,
// or cannot be read.
func (e endedRunOf) leftJob(id string) (api.Job, time.Time, bool) {
	_, rec, ended, ok := api.LastEnded(e.dir, e.sweep, func(string, error) {})
	if i := slices.IndexFunc(rec.Jobs, func(j api.Job) bool { return j.ID == id }); ok && i >= 0 {
		return rec.Jobs[i], ended, true
	}
	return api.Job{}, time.Time{}, false
}

// jobOrLeft is job id as c answers for it, or, where the gpuq run of its sweep has
// ended and neither a run nor the daemon has a sweep of that name, as that run left
// it, which it says once on notices (left: which it is): the job's attempts and their
// logs are there as they ended.
func jobOrLeft(c daemonClient, id string, notices io.Writer) (j api.Job, left bool, err error) {
	j, err = c.Job(id)
	var ended endedRunOf
	if !errors.As(err, &ended) {
		var ok bool
		if ended, ok = sweepOnlyLeft(c, sweepOfJob(id), err); !ok {
			return j, false, err
		}
	}
	got, at, ok := ended.leftJob(id)
	if !ok {
		return j, false, err
	}
	fmt.Fprintf(notices, "gpuq: %s as the gpuq run of sweep %s left it as it ended, at %s\n", id, ended.sweep, at.Local().Format("2006-01-02 15:04:05"))
	return got, true, nil
}

// runStarting reports whether a gpuq run of sweep holds its name on the state
// directory and serves it not yet, or does (see api.RunStarting); false for no sweep,
// or over the network, where the runs are not here.
func (s *settings) runStarting(sweep string) bool {
	dir, err := s.stateDir()
	return sweep != "" && err == nil && !s.remote() && api.RunStarting(dir, sweep)
}

// whereLeft says, of a job or sweep that a daemon refused as unknown (err), that a
// gpuq run of that sweep has ended there and where what it left is read: the daemon's
// words alone send to gpuq status, whose list does not have it. "" where err names
// none, says so already (no daemon runs: endedRunOf), or no run of it left a record.
//
// "" too where the daemon, or a gpuq run running, has a sweep of that name, as it may
// where it refused a job of it (gpuq why quickstart.99, the daemon's quickstart having
// six jobs): its refusal names that sweep's jobs, and those are what gpuq status and
// logs of its jobs reach, not the ended run's (see jobOrLeft); pointing at what an
// ended run of a sweep of the same name left would be beside the point. A sweep
// refused as unknown is one that whoever was asked has not.
func (s *settings) whereLeft(err error) string {
	var ended endedRunOf
	name, job := unknownOf(err)
	if name == "" || errors.As(err, &ended) || s.remote() {
		return ""
	}
	sweep := name
	if job {
		sweep = sweepOfJob(name)
		if s.hasSweep(sweep) {
			return ""
		}
	}
	dir, derr := s.stateDir()
	if derr != nil {
		return ""
	}
	_, _, at, ok := api.LastEnded(dir, sweep, func(string, error) {})
	if !ok {
		return ""
	}
	return fmt.Sprintf("a gpuq run of sweep %s ended at %s: gpuq results %s and gpuq report %s read the jobs it left, as gpuq status ID and logs ID do each of them",
		sweep, at.Local().Format("2006-01-02 15:04"), sweep, sweep)
}

// hasSweep reports whether the daemon, or a gpuq run that runs, answers for a sweep so
// named; false where none does, or none can be asked.
func (s *settings) hasSweep(sweep string) bool {
	c, err := s.client()
	if err == nil {
		_, err = c.States(api.StatesRequest{Sweep: sweep})
	}
	return err == nil
}

// sweepOnlyLeft is sweep as endedRunOf where a daemon that runs, asked for a job of
// it, refused (err) for it has no sweep of that name, and a gpuq run of it ended on
// the daemon's state directory and left its record; false otherwise. (Where no daemon
// runs, routed says so itself.) A daemon reached over the network has its own
// directory, not this machine's.
func sweepOnlyLeft(c daemonClient, sweep string, err error) (endedRunOf, bool) {
	var refused scheduler.Refused
	if !errors.As(err, &refused) {
		return endedRunOf{}, false
	}
	var dir string
	switch c := c.(type) {
	case *routed:
		dir = c.dir
	case *api.Client:
		if c.Remote() {
			return endedRunOf{}, false
		}
		dir = c.Dir()
	default:
		return endedRunOf{}, false
	}
	e, ok := endedRunIn(dir, sweep)
	if !ok {
		return e, false
	}
	var unknown scheduler.UnknownSweep
	_, err = c.States(api.StatesRequest{Sweep: sweep})
	return e, errors.As(err, &unknown)
}

// noRunOf is a sweep, or a job of it, that neither a daemon nor any gpuq run of a state
// directory runs. Where no daemon left its state there either (nothingLeft), nothing
// there has it: no such job or sweep, refused as a daemon refuses one it does not have
// (exit 2), not a daemon to start. Otherwise that state may have it, and what stands
// is that no daemon runs (exit 1). gpuq results and report tell it from a daemon that
// does not answer (see sweepNowhere).
type noRunOf struct {
	dir, sweep string
	job        string // the job asked for; "" for the sweep
	runs       []api.Run
	// nothingLeft: no daemon left its state on dir (see routed).
	nothingLeft bool
}

func (e noRunOf) Error() string {
	if !e.nothingLeft {
		return fmt.Sprintf("no gpuq daemon runs on %s, and no gpuq run runs sweep %s there; the gpuq runs there: %s",
			e.dir, e.sweep, api.RunsText(e.runs))
	}
	what := noneNamed(e.sweep, e.job)
	if len(e.runs) > 0 {
		return fmt.Sprintf("%s: no gpuq daemon runs on %s, nor did one leave jobs there, and no gpuq run runs sweep %s there (the gpuq runs there: %s; gpuq status lists their jobs)",
			what, e.dir, e.sweep, api.RunsText(e.runs))
	}
	return fmt.Sprintf("%s: no gpuq daemon runs on %s, nor did one leave jobs there (--state-dir or GPUQ_STATE_DIR names another daemon's directory)", what, e.dir)
}

// Unwrap makes a job or sweep that nothing has a refusal (exit 2).
func (e noRunOf) Unwrap() error {
	if e.nothingLeft {
		return scheduler.Refused(e.Error())
	}
	return nil
}

// only is the one that acts on a whole machine (a drain): the daemon, or the one run.
func (r *routed) only() (daemonClient, error) {
	switch {
	case r.daemon != nil && !offline(r.daemon, ""):
		return r.daemon, nil
	case len(r.runs) == 1:
		return r.runs[0].c, nil
	}
	return nil, fmt.Errorf("no gpuq daemon runs on %s, and %d gpuq runs do (%s): a card is drained for one; gpuq top --sweep S drains it there",
		r.dir, len(r.runs), api.RunsText(r.allRuns()))
}

// each is the daemon, if one runs (or the state its last one left), and each gpuq
// run; where there is none of them, no daemon runs. A state left that cannot be read
// fails it: the daemon's jobs are not to be had.
func (r *routed) each() ([]daemonClient, error) {
	if r.unread != nil {
		return nil, r.unread
	}
	var each []daemonClient
	if r.daemon != nil {
		each = append(each, r.daemon)
	}
	for _, rs := range r.runs {
		each = append(each, rs.c)
	}
	if len(each) == 0 {
		return nil, r.noDaemon()
	}
	return each, nil
}

// noDaemon is the error of a verb that found no daemon and no gpuq run: the one the
// daemon's dial returned, which says which stopped, when, and what starts one.
func (r *routed) noDaemon() api.NoDaemonError {
	none := r.none
	if none.Dir == "" {
		none.Dir = r.dir
	}
	return none
}

func (r *routed) allRuns() []api.Run {
	out := make([]api.Run, len(r.runs))
	for i, rs := range r.runs {
		out[i] = rs.run
	}
	return out
}

// Jobs lists a sweep's jobs, from whoever runs it; with no sweep, every job of the
// daemon and of each run.
func (r *routed) Jobs(sweep string, states []string) ([]api.Job, error) {
	if sweep != "" {
		c, err := r.to(sweep)
		if err != nil {
			return nil, err
		}
		return c.Jobs(sweep, states)
	}
	each, err := r.each()
	if err != nil {
		return nil, err
	}
	all := []api.Job{} // none is {"jobs": []}, not null
	for _, c := range each {
		jobs, err := c.Jobs("", states)
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
	}
	return all, nil
}

func (r *routed) Job(id string) (api.Job, error) {
	c, err := r.toJob(id)
	if err != nil {
		return api.Job{}, err
	}
	return c.Job(id)
}

func (r *routed) Why(id string) (api.WhyResponse, error) {
	c, err := r.toJob(id)
	if err != nil {
		return api.WhyResponse{}, err
	}
	return c.Why(id)
}

// Act acts on a sweep where it runs, on each job where its sweep runs, or, for a
// --where of no sweep, on the jobs that meet it wherever they run.
func (r *routed) Act(v api.Verb, sel api.SelectRequest) ([]string, error) {
	switch {
	case sel.Sweep != "":
		c, err := r.to(sel.Sweep)
		if err != nil {
			return nil, err
		}
		return c.Act(v, sel)
	case sel.Where != "":
		return r.actWhere(v, sel)
	}
	var order []daemonClient
	ids := map[daemonClient][]string{}
	for _, id := range sel.IDs {
		c, err := r.toJob(id)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(order, c) {
			order = append(order, c)
		}
		ids[c] = append(ids[c], id)
	}
	// Jobs named of more than one of them are each known where they are before any is
	// changed, so that a command refused for a job nobody has (exit 2) has changed
	// nothing, whatever order they were named in: each refuses an id it does not have.
	// The state a stopped daemon left changes nothing: it refuses a job it does not
	// have and says that no daemon runs of one it has, before any job is changed
	// elsewhere, the jobs of a gpuq run named with it included.
	if len(order) > 1 {
		for _, c := range order {
			if _, ok := c.(*stateReader); !ok {
				if _, err := c.States(api.StatesRequest{IDs: ids[c]}); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, c := range order {
		if sr, ok := c.(*stateReader); ok {
			if _, err := sr.Act(v, api.SelectRequest{IDs: ids[c]}); err != nil {
				return nil, err
			}
		}
	}
	var done []string
	for _, c := range order {
		got, err := c.Act(v, api.SelectRequest{IDs: ids[c]})
		if err != nil {
			return done, err
		}
		done = append(done, got...)
	}
	return done, nil
}

// actWhere acts where each of the daemon and the runs has jobs that meet sel.Where.
// Each refuses a key none of its jobs has, or values none meets; that is an error only
// where all refuse it, as the daemon alone would: a misspelt key is not "no job to
// change". The state a daemon left, where none runs, changes nothing: it answers
// first, and where jobs of it meet sel.Where, that no daemon runs to change them is
// the answer (exit 1), before any job of a gpuq run is changed.
func (r *routed) actWhere(v api.Verb, sel api.SelectRequest) ([]string, error) {
	var done []string
	var refusal error
	acted := false
	each, err := r.each()
	if err != nil {
		return nil, err
	}
	var refused scheduler.Refused
	for _, c := range each {
		if sr, ok := c.(*stateReader); ok {
			_, err := sr.Act(v, sel)
			var none api.NoDaemonError
			switch {
			case err == nil: // its jobs meet it, and the verb would change none of them
				acted = true
				continue
			case errors.As(err, &refused):
				refusal = tellingMore(refusal, err)
				continue
			case errors.As(err, &none):
				err = fmt.Errorf("%w; jobs the last one left there have %s, so nothing was changed (gpuq %s --sweep SWEEP --where %s acts on a gpuq run's jobs alone)",
					err, sel.Where, v, sel.Where)
			}
			return nil, err
		}
	}
	for _, c := range each {
		if _, ok := c.(*stateReader); ok {
			continue
		}
		got, err := c.Act(v, sel)
		switch {
		case errors.As(err, &refused):
			refusal = tellingMore(refusal, err)
			continue
		case err != nil:
			return done, err
		}
		acted = true
		done = append(done, got...)
	}
	if !acted {
		return nil, refusal
	}
	return done, nil
}

// tellingMore is the refusal of a --where to give where each that was asked refused it:
// the first, but for one of values that none of its jobs has (plans.Where.Unmet) over
// one that none of them has the key at all: the jobs that have the key are those meant.
func tellingMore(was, err error) error {
	if was == nil || plans.UnknownText(was.Error()) && !plans.UnknownText(err.Error()) {
		return err
	}
	return was
}

func (r *routed) DrainCard(req api.DrainRequest) error {
	c, err := r.only()
	if err != nil {
		return err
	}
	return c.DrainCard(req)
}

func (r *routed) Update(req api.UpdateRequest) (api.UpdateResponse, error) {
	c, err := r.to(req.Sweep)
	if err != nil {
		return api.UpdateResponse{}, err
	}
	return c.Update(req)
}

func (r *routed) Attempt(req api.StreamRequest) (io.ReadWriteCloser, error) {
	c, err := r.toJob(req.Attempt.Job)
	if err != nil {
		return nil, err
	}
	return c.Attempt(req)
}

// JobsJSON is Jobs' listing as JSON: a sweep's as whoever runs it sends it; every
// job's gathered whole, as Jobs gathers them (a gpuq run's sweep is its own, small).
func (r *routed) JobsJSON(sweep string, states []string) (io.ReadCloser, error) {
	if sweep != "" {
		c, err := r.to(sweep)
		if err != nil {
			return nil, err
		}
		return c.JobsJSON(sweep, states)
	}
	jobs, err := r.Jobs("", states)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(api.JobsResponse{Jobs: jobs})
	return io.NopCloser(bytes.NewReader(data)), err
}

// States asks whoever runs each job's sweep for its state, and answers in the order
// named; a sweep's from whoever runs it; with neither, every job's of each.
func (r *routed) States(req api.StatesRequest) ([]api.JobState, error) {
	if req.Sweep != "" {
		c, err := r.to(req.Sweep)
		if err != nil {
			return nil, err
		}
		return c.States(req)
	}
	if len(req.IDs) == 0 {
		each, err := r.each()
		if err != nil {
			return nil, err
		}
		all := []api.JobState{}
		for _, c := range each {
			got, err := c.States(req)
			if err != nil {
				return nil, err
			}
			all = append(all, got...)
		}
		return all, nil
	}
	ids := map[daemonClient][]string{}
	for _, id := range req.IDs {
		c, err := r.toJob(id)
		if err != nil {
			return nil, err
		}
		ids[c] = append(ids[c], id)
	}
	of := make(map[string]api.JobState, len(req.IDs))
	for c, named := range ids {
		got, err := c.States(api.StatesRequest{IDs: named})
		if err != nil {
			return nil, err
		}
		for _, j := range got {
			of[j.ID] = j
		}
	}
	out := make([]api.JobState, 0, len(req.IDs))
	for _, id := range req.IDs {
		if j, ok := of[id]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}
