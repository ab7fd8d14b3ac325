package scheduler

// What the engine learns of each shape: measured peaks, floors proven by OOMs, and the
// estimates of the shape's jobs that follow from them.

import (
	"iter"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// learnPeaks keeps, for each running attempt, the most its processes held on a card and
// of host RAM, and puts the copies it makes in running; an attempt that has run
// LearnAfter speaks for its shape. What it measures is the engine's at once, and the
// store's at most Config.SaveMeasures later (see save). It returns the running
// attempts whose reservations what it learned changed since running was read.
func (e *Engine) learnPeaks(running []*state.Attempt) (rewritten []string) {
	if m, ok := e.runner.(HostMeter); ok && len(running) > 0 {
		e.hostNow = m.HostMemory()
	}
	var teaching, teachFirst, teachMean []*state.Attempt
	now, last := e.clock.Now(), e.lastRound
	e.lastRound = now
	view := e.store.Latest()
	crowds := e.followed(running)
	var at []int
	for i, a := range running {
		at = e.appendCards(at[:0], a, crowds[i])
		peak, unknown := e.measureFollowed(a, at, crowds[i])
		host := e.hostNow[a.ID]
		grew := peak > a.Peak || host > a.HostPeak
		memory, moved := a.Memory.Add(now.Sub(a.Started), peak)
		util, samples, teach := e.measureUtil(a, now)
		if grew || moved || unknown && !a.PeakUnknown || samples != a.UtilSamples {
			c := e.unsaved.measuredAgain(view, a)
			c.Util, c.UtilSamples = util, samples
			c.Peak, c.HostPeak, c.PeakUnknown = max(peak, a.Peak), max(host, a.HostPeak), a.PeakUnknown || unknown
			c.Memory = memory
			a = c
			running[i] = a
		}
		if teach {
			teachFirst = append(teachFirst, a)
		}
		if e.teachMean(a, crowds[i], now, false) {
			teachMean = append(teachMean, a)
		}
		// What an attempt teaches changes only when it comes of age or its peak grows.
		if of := a.Started.Add(e.cfg.LearnAfter); !now.Before(of) && (grew || last.Before(of)) {
			teaching = append(teaching, a)
		}
	}
	// Learned once every attempt is measured: a reservation learning changes (see
	// reserve) holds at least what its attempt was measured at this round. Each shape
	// learns once from all of its attempts: when the attempts a round started come of
	// age together, a fleet's thousands, a change of the shape each would re-estimate
	// its queued jobs and running attempts as many times.
	for shape, as := range byShape(teaching) {
		ids, _ := e.changeShape(shape, func(l *state.Shape) {
			for _, a := range as {
				learnPeak(l, a)
			}
		}, nil)
		rewritten = append(rewritten, ids...)
	}
	e.teachUtils(teachFirst, true)
	e.teachUtils(teachMean, false)
	e.save(running, now)
	return rewritten
}

// byShape yields attempts by shape, the shapes in the order of their first attempt.
func byShape(attempts []*state.Attempt) func(yield func(string, []*state.Attempt) bool) {
	return func(yield func(string, []*state.Attempt) bool) {
		if len(attempts) == 0 {
			return
		}
		var order []string
		of := map[string][]*state.Attempt{}
		for _, a := range attempts {
			if _, ok := of[a.Shape]; !ok {
				order = append(order, a.Shape)
			}
			of[a.Shape] = append(of[a.Shape], a)
		}
		for _, shape := range order {
			if !yield(shape, of[shape]) {
				return
			}
		}
	}
}

// unsaved is a running attempt as measured (now) and the stored version it stands for
// (stored); memory says its memory was measured anew, not only its metrics read.
//
// now is the engine's own copy, which learnPeaks changes in place round after round
// rather than copy a whole attempt for each reading (hundreds a round): it is never
// put in the store while it is kept here (save forgets it as it writes it), and what
// leaves the engine's goroutine is a copy of it (runningCopies).
type unsaved struct {
	stored, now *state.Attempt
	memory      bool
	// forgotten: no longer kept (see forget), for a list made before to tell.
	forgotten bool
}

// measures is what was measured of running attempts and not yet written (see
// Config.SaveMeasures): by attempt, and by the stored version each stands for, which
// is how every read of the running attempts finds it (see measured), a pointer's
// hash being cheaper than an id's for hundreds of attempts a round.
type measures struct {
	byID     map[string]*unsaved
	byStored map[*state.Attempt]*unsaved
	// puts counts what was kept: a stored version found with none kept may have some
	// since, once it changed (see roundRunningNow).
	puts uint64
}

func newMeasures() measures {
	return measures{byID: map[string]*unsaved{}, byStored: map[*state.Attempt]*unsaved{}}
}

// put keeps u, over what was kept of its attempt.
func (m *measures) put(u *unsaved) {
	m.forget(u.now.ID)
	m.byID[u.now.ID] = u
	m.byStored[u.stored] = u
	m.puts++
}

// measuredAgain returns the running attempt a, as measured reads it (see
// appendRunning), for this round's measures to be written in: the engine's own copy
// of it, kept as put would, changed in place where a is that copy already. The stored
// version it stands for is the one kept with it, or a itself: found without a lookup
// in view, which the engine does for hundreds of attempts every round.
func (m *measures) measuredAgain(view state.View, a *state.Attempt) *state.Attempt {
	u, ok := m.byID[a.ID]
	if ok && u.now == a {
		u.memory = true
		return a
	}
	c := *a
	stored := a
	if ok {
		stored = view.Attempt(a.ID)
	}
	m.put(&unsaved{stored: stored, now: &c, memory: true})
	return &c
}

// forget drops what was kept of an attempt.
func (m *measures) forget(id string) {
	if u, ok := m.byID[id]; ok {
		u.forgotten = true
		delete(m.byStored, u.stored)
		delete(m.byID, id)
	}
}

// save writes the running attempts' measures not yet written: their memory once
// SaveMeasures has passed since it last did, their metrics alone once saveMetricsEvery
// has too (and with their memory, whenever that is written).
func (e *Engine) save(running []*state.Attempt, now time.Time) {
	if len(e.unsaved.byID) == 0 {
		return
	}
	memory := now.Sub(e.savedAt) >= e.cfg.SaveMeasures
	metrics := now.Sub(e.metricsSavedAt) >= max(e.cfg.SaveMeasures, saveMetricsEvery)
	if !memory && !metrics {
		return
	}
	view := e.store.Latest()
	var measured []*state.Attempt
	for _, a := range running {
		if u, ok := e.unsaved.byID[a.ID]; ok && (metrics || memory && u.memory) {
			measured = append(measured, e.measured(view.Attempt(a.ID)))
			e.unsaved.forget(a.ID)
		}
	}
	if memory {
		e.savedAt = now
	}
	if metrics {
		e.metricsSavedAt = now
	}
	if len(measured) > 0 {
		e.put(state.Change{Attempts: measured})
	}
}

// measured is a running attempt as the store holds it, with what was measured of it
// since it was written: every read of the running attempts by the engine goes through
// it, so that its decisions do not depend on when measures are written.
func (e *Engine) measured(a *state.Attempt) *state.Attempt {
	m, _ := e.measuredKept(a)
	return m
}

// measuredKept is measured, and what is kept of a's measures (nil: nothing).
func (e *Engine) measuredKept(a *state.Attempt) (*state.Attempt, *unsaved) {
	if u, ok := e.unsaved.byStored[a]; ok {
		return u.now, u
	}
	u, ok := e.unsaved.byID[a.ID]
	if !ok {
		return a, nil
	}
	// The store's copy changed since (its reservation, its timeout): take the measures
	// over to it.
	c := *a
	c.Peak, c.HostPeak, c.PeakUnknown = max(a.Peak, u.now.Peak), max(a.HostPeak, u.now.HostPeak), a.PeakUnknown || u.now.PeakUnknown
	c.Memory, c.Metrics = u.now.Memory, u.now.Metrics
	c.Util, c.UtilSamples = u.now.Util, u.now.UtilSamples
	kept := &unsaved{stored: a, now: &c, memory: u.memory}
	e.unsaved.put(kept)
	return &c, kept
}

// runningNow is the attempts that hold cards now (as the store's latest view holds
// them), as measured.
func (e *Engine) runningNow() []*state.Attempt { return e.appendRunning(nil) }

// runningCopies is runningNow for outside the engine's goroutine: copies, since the
// engine changes its own measured copies in place (see unsaved).
func (e *Engine) runningCopies() []*state.Attempt {
	running := e.runningNow()
	for i, a := range running {
		c := *a
		running[i] = &c
	}
	return running
}

// roundRunningNow is runningNow for a round, in the slice of the round before: a round
// reads them once or twice, every round, and nothing keeps them past it. Only a round
// may call it, and its last call's slice is the one to use.
//
// A fleet's tens of thousands of running attempts, each looked up among the measures
// kept, cost its round a millisecond and more: most are found, rather, beside the last
// call's, as the same stored versions, in the same order (the store's, by id), with
// the same measures kept, or none while none was kept since.
func (e *Engine) roundRunningNow() []*state.Attempt {
	e.roundRunning = e.measuredBeside(e.roundRunning[:0], e.store.RunningNow())
	return e.roundRunning
}

// measuredBeside appends each of running, as measured, to dst: the measured copy kept
// of the same stored version the last call found, where that is still kept, or the
// stored version itself where none was kept then or since; else measuredKept's.
func (e *Engine) measuredBeside(dst []*state.Attempt, running iter.Seq[*state.Attempt]) []*state.Attempt {
	r := &e.roundKept
	r.begin()
	unchanged := r.puts == e.unsaved.puts
	r.puts = e.unsaved.puts
	for a := range running {
		u, same, _ := r.seek(a)
		m := a
		switch {
		case same && u != nil && !u.forgotten:
			m = u.now
		case same && u == nil && unchanged:
		default:
			m, u = e.measuredKept(a)
		}
		dst = append(dst, m)
		r.add(a, u)
	}
	r.end()
	return dst
}

// roundKept is what was kept of the measures of each running attempt, as stored, that
// the last call of measuredBeside found (nil: nothing), as of when puts measures had
// been kept.
type roundKept struct {
	besides[*unsaved]
	puts uint64
}

// appendRunning appends the attempts that hold cards, as measured, to dst.
func (e *Engine) appendRunning(dst []*state.Attempt) []*state.Attempt {
	for a := range e.store.RunningNow() {
		dst = append(dst, e.measured(a))
	}
	return dst
}

// runningOf is the running attempts of a shape, as measured: those followed (see
// crowds), unless some running attempt is not followed yet (a daemon took it up and no
// round has run since), when every running attempt is looked through.
func (e *Engine) runningOf(view state.View, shape string) []*state.Attempt {
	var out []*state.Attempt
	if e.store.RunningLen() != len(e.crowds.of) {
		for _, a := range e.runningNow() {
			if a.Shape == shape {
				out = append(out, a)
			}
		}
		return out
	}
	for _, c := range e.crowds.shapes[shape] {
		if a := view.Attempt(c.id); a != nil && a.Running() {
			out = append(out, e.measured(a))
		}
	}
	return out
}

// measure is the most an attempt's processes hold on one of its cards now, and whether
// NVML could not tell some of them (or whose they are, or could not read the card): such
// a reading is a floor, not a peak.
func (e *Engine) measure(a *state.Attempt) (most int64, unknown bool) {
	var at [4]int
	return e.measureAt(a, e.appendCards(at[:0], a, nil))
}

// measureFollowed is measureAt of a round, for an attempt followed as c (nil: not
// followed): what was measured of it before, while none of its cards has read
// otherwise since. A fleet's round found each of its tens of thousands of attempts
// on its cards, most of which read as they did. Only a round may call it: the cards
// are those its owners were resolved for.
func (e *Engine) measureFollowed(a *state.Attempt, at []int, c *crowd) (most int64, unknown bool) {
	if c == nil {
		return e.measureAt(a, at)
	}
	// Another list of cards may have none of its cards at all (its worker went):
	// nothing at its positions then says that they changed.
	if c.measuredRead == e.cardsRead && !e.changedSince(at, c.measured) {
		return c.peak, c.unknown
	}
	c.peak, c.unknown = e.measureAt(a, at)
	c.measured, c.measuredRead = e.resolved, e.cardsRead
	return c.peak, c.unknown
}

// measureAt is measure of the cards at positions at, the attempt's.
func (e *Engine) measureAt(a *state.Attempt, at []int) (most int64, unknown bool) {
	for _, i := range at {
		u := e.useOn(a.ID, i)
		most, unknown = max(most, u.bytes), unknown || u.unknown
	}
	return most, unknown
}

// use is what an attempt's processes hold on a card: their sum, and whether NVML could
// not tell some of it.
type use struct {
	bytes   int64
	unknown bool
}

// useOn is what attempt's processes hold on the card at position i. A process NVML
// lists whose owner cannot be told could be anyone's.
func (e *Engine) useOn(attempt string, i int) use {
	c := &e.cards[i]
	u := use{unknown: c.Fault != ""}
	for j, o := range e.ownersOf(i) {
		switch {
		case o.attempt == attempt:
			u.add(c.Processes[j])
		case o.attempt == "" && c.Processes[j].Hidden:
			u.unknown = true
		}
	}
	return u
}

// add counts a process's memory in.
func (u *use) add(p gpu.Process) {
	if p.Used == gpu.Unknown {
		u.unknown = true
	} else {
		u.bytes += p.Used
	}
}

// learn takes an attempt's measured peaks as its shape's, if they say more than what is
// known, and re-estimates the shape's jobs; and, of an attempt that succeeded, how long
// it ran. It returns the running attempts whose reservations it changed (see reserve).
func (e *Engine) learn(shape string, a *state.Attempt, with *state.Change) (rewritten []string, err error) {
	return e.changeShape(shape, func(l *state.Shape) {
		learnPeak(l, a)
		if a.Outcome == plans.Success {
			l.Runs = min(l.Runs+1, 10)
			l.Duration += (a.Ended.Sub(a.Started) - l.Duration) / time.Duration(l.Runs)
			// Whether it shared its cards, and how fast it ran then (see crowd.go).
			switch took := a.Ended.Sub(a.Started); {
			case a.Crowd == 0: // not followed from its start
			case a.Crowd < 1+1e-6:
				l.LearnAlone(took)
			default:
				l.LearnShared(took, a.Pace)
			}
		}
	}, with)
}

// learnPeak takes an attempt's measured peaks as its shape's, if they say more.
func learnPeak(l *state.Shape, a *state.Attempt) {
	if !a.PeakUnknown {
		l.Peak = max(l.Peak, a.Peak)
	}
	l.Host = max(l.Host, a.HostPeak)
}

// changeShape changes what is known of a shape and, if that changed its peaks or
// floor, re-estimates the shape's jobs: its queued ones as the store reads them
// (Shape.Rev), the reservations of its running ones here, which it returns. What with
// holds (nil: nothing) is written with it, in one transaction; an error is put's.
func (e *Engine) changeShape(name string, change func(*state.Shape), with *state.Change) (rewritten []string, err error) {
	l := state.Shape{Name: name}
	if old := e.store.KnownShape(name); old != nil {
		l = *old
	}
	before := l
	change(&l)
	if l == before {
		if with != nil {
			return nil, e.put(*with)
		}
		return nil, nil
	}
	estimates := l.Peak != before.Peak || l.Host != before.Host || l.Floor != before.Floor
	if estimates {
		l.Rev++ // the store re-estimates its queued jobs
	}
	var c state.Change
	if with != nil {
		c = *with
	}
	c.Shapes = append(c.Shapes, &l)
	if err := e.put(c); err != nil {
		return nil, err
	}
	if estimates {
		rewritten = e.reserve(name)
	}
	wasUtil, wasKnown := before.PackUtil()
	if util, known := l.PackUtil(); util != wasUtil || known != wasKnown {
		e.crowdRefreshUtil(crowdShape(name)) // what its running jobs count at changed
	}
	return rewritten, nil
}

// reserve applies what is known of a shape to the reservations of its running
// attempts, and returns those it changed.
func (e *Engine) reserve(shape string) (rewritten []string) {
	view := e.store.Latest()
	l := view.Shape(shape)
	var changed []*state.Attempt
	for _, a := range e.runningOf(view, shape) {
		est, host := state.EstimateBy(view.Job(a.Job), l)
		// A running attempt holds at least what it was measured at.
		if r, h := max(est, a.Peak), max(host, a.HostPeak); r != a.Reserve || h != a.HostReserve {
			c := *a
			c.Reserve, c.HostReserve = r, h
			changed = append(changed, &c)
			rewritten = append(rewritten, c.ID)
		}
	}
	if len(changed) > 0 && e.put(state.Change{Attempts: changed}) == nil {
		// Each copy has what was measured of its attempt (runningOf reads them as
		// measured), now written: nothing of it is unsaved, and the round's read of it
		// after (see schedule) takes the store's as it is rather than copy it again,
		// thousands a round where a fleet's shapes learn. Kept as its own unsaved
		// version instead, the store's copy would be changed in place by the next
		// round's measures (see measuredAgain), under the views that hand it out.
		for _, c := range changed {
			e.unsaved.forget(c.ID)
		}
	}
	return rewritten
}
