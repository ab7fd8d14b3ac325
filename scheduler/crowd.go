package scheduler

// Who shares each card, followed as attempts start and end: how many of gpuq's attempts
// each running attempt has shared its cards with over its run, and how fast the
// sharing model expected it to run (Attempt.Crowd and Pace). What is seen of an
// attempt's duration beside that says whether sharing slows its shape more than its
// utilization does (Shape.Shared). Processes that are not gpuq's and keep a card busy
// (another user's trainer) are company too, as each round reads them (see
// crowdForeign): a run beside one is no run alone.

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// crowds is who runs on each card, and what is followed of each running attempt.
type crowds struct {
	// on is who runs on each card; of what is followed of each attempt, by id. A card's
	// list holds what is followed of each, not its id: a fleet's starts and ends each
	// walked their cards' lists looking every id up.
	on map[plans.CardID][]*crowd
	of map[string]*crowd
	// shapes are the running attempts of each shape, in the order they were followed:
	// what is learned of a shape changes what its attempts reserve and count at, and a
	// fleet's round cannot afford to look through every running attempt for each shape
	// that learned something.
	shapes map[string][]*crowd
	// workers counts the running attempts on each machine: how many trainers share it
	// (see startAll), which a fleet's round cannot count through every running attempt.
	workers map[string]int
	// followed is the crowds the last call of followed found (see besides).
	followed besides[*crowd]
	// foreign is what processes that are not gpuq's keep busy on each card, as the
	// last round read it: only cards where they keep it busy (see crowdForeign).
	// foreignWas is the map of the reading before, kept to be filled again.
	// foreignRead is the reading of the cards (Engine.readings) foreign is of.
	foreign, foreignWas map[plans.CardID]company
	foreignRead         uint64
}

// company is what processes that are not gpuq's keep busy on a card: how many count as
// company, and their utilization together (0 to 1 each).
type company struct {
	n    int
	util float64
}

func newCrowds() crowds {
	return crowds{on: map[plans.CardID][]*crowd{}, of: map[string]*crowd{}, shapes: map[string][]*crowd{}, workers: map[string]int{},
		foreign: map[plans.CardID]company{}, foreignWas: map[plans.CardID]company{}}
}

// running reports whether an attempt of a shape runs.
func (cs crowds) running(shape string) bool { return len(cs.shapes[shape]) > 0 }

// without returns cs less c, in the same array: nothing keeps a list past a change.
func without(cs []*crowd, c *crowd) []*crowd {
	if i := slices.Index(cs, c); i >= 0 {
		return slices.Delete(cs, i, i+1)
	}
	return cs
}

// crowd is a running attempt as followed: its cards and shape; since when it has had k
// attempts on its busiest card (itself included) and run at the model's pace; what
// those were over its run before then, integrated (in seconds); and whether it has
// been followed from its start.
type crowd struct {
	id     string // its attempt's
	cards  []plans.CardID
	worker string
	shape  string
	// util is what it counts at on its cards, known whether measured, and planned what
	// it counts at beside another sweep's jobs where its plan has it count as nothing
	// (utilCounts', kept up by crowdRefreshUtil): a round reads them for every running
	// attempt.
	util          float64
	known         bool
	planned       float64
	started       time.Time
	since         time.Time
	k, pace       float64
	kSum, paceSum float64
	whole         bool
	// gone: it was followed, and its attempt has ended (see crowdLeave); a list of
	// followed made before then still names it.
	gone bool
	// taught: its mean utilization has been taught to its shape (see teachMean).
	taught bool
	// at is where cards are among the round's cards, as of the reading atRead (see
	// positions).
	at     []int
	atRead uint64
	// peak and unknown are what its processes held on its cards (see measureAt) at
	// the resolution of owners numbered measured (0: never measured), of the cards'
	// list numbered measuredRead (see Engine.cardsRead): what a round finds again,
	// without reading its cards, while the list is the same and none of them reads
	// otherwise.
	peak         int64
	unknown      bool
	measured     uint64
	measuredRead uint64
}

// crowdJoin follows an attempt that starts now on its cards (whole), or one found
// running that was not followed (taken up after a restart).
func (e *Engine) crowdJoin(a *state.Attempt, now time.Time, whole bool) {
	if _, ok := e.crowds.of[a.ID]; ok {
		return
	}
	c := &crowd{id: a.ID, worker: a.Worker, shape: a.Shape, started: a.Started, since: now, whole: whole}
	// One taken up (a daemon started again) once its sampling was over may have taught
	// its mean already; one taken up before cannot have.
	c.taught = !whole && now.Sub(a.Started) >= e.utilUntil()
	c.util, c.known, c.planned = e.utilCounts(a.Shape, e.store.KnownShape(a.Shape))
	for _, g := range a.GPUs {
		id := plans.CardID{Worker: a.Worker, Index: g}
		c.cards = append(c.cards, id)
		e.crowds.on[id] = append(e.crowds.on[id], c)
	}
	e.crowds.of[a.ID] = c
	e.crowds.shapes[a.Shape] = append(e.crowds.shapes[a.Shape], c)
	e.crowds.workers[a.Worker]++
	e.crowdRefresh(c.cards, now)
}

// crowdLeave stops following an attempt that ends now, and returns its Crowd and Pace
// (both 0 where it was not followed from its start).
func (e *Engine) crowdLeave(id string, now time.Time) (crowd, pace float64) {
	c, ok := e.crowds.of[id]
	if !ok {
		return 0, 0
	}
	// Its own stretch closes now; its neighbours', closed by the refresh below, run
	// at their new pace from now.
	e.crowdStretch(c, now)
	c.gone = true
	delete(e.crowds.of, id)
	if cs := without(e.crowds.shapes[c.shape], c); len(cs) == 0 {
		delete(e.crowds.shapes, c.shape)
	} else {
		e.crowds.shapes[c.shape] = cs
	}
	if n := e.crowds.workers[c.worker] - 1; n > 0 {
		e.crowds.workers[c.worker] = n
	} else {
		delete(e.crowds.workers, c.worker)
	}
	for _, card := range c.cards {
		if cs := without(e.crowds.on[card], c); len(cs) == 0 {
			delete(e.crowds.on, card)
		} else {
			e.crowds.on[card] = cs
		}
	}
	e.crowdRefresh(c.cards, now)
	if !c.whole {
		return 0, 0
	}
	// Over what its stretches cover, which an end dated early does not shorten.
	if ran := c.since.Sub(c.started).Seconds(); ran > 0 {
		return c.kSum / ran, c.paceSum / ran
	}
	return c.k, c.pace
}

// followed is the crowd of each of attempts, in their order (nil: not followed), in
// an array of the engine's that the call after next fills again. A round needs the
// crowd of every running attempt, twice: most are found beside the last call's (see
// besides), the others looked up.
func (e *Engine) followed(attempts []*state.Attempt) []*crowd {
	cs := &e.crowds
	cs.followed.begin()
	for _, a := range attempts {
		c, _, ok := cs.followed.seek(a)
		if !ok || c == nil || c.gone {
			c = cs.of[a.ID]
		}
		cs.followed.add(a, c)
	}
	return cs.followed.end()
}

// positions is where c's cards are among the round's cards (see cardAt), found again
// only when the cards read are not those it was found for. Before any cards were
// read (cardsRead 0) there are none to find.
func (e *Engine) positions(c *crowd) []int {
	if c.atRead == e.cardsRead {
		return c.at
	}
	c.at, c.atRead = c.at[:0], e.cardsRead
	for _, id := range c.cards {
		if i, ok := e.cardAt(id.Worker, id.Index); ok {
			c.at = append(c.at, i)
		}
	}
	return c.at
}

// appendCards appends to dst where a's cards are among the round's: as its crowd c
// keeps them (see positions), or found (c nil: a is not followed).
func (e *Engine) appendCards(dst []int, a *state.Attempt, c *crowd) []int {
	if c != nil {
		return append(dst, e.positions(c)...)
	}
	for _, idx := range a.GPUs {
		if i, ok := e.cardAt(a.Worker, idx); ok {
			dst = append(dst, i)
		}
	}
	return dst
}

// crowdTrack follows the running attempts not followed yet: those a daemon took up.
func (e *Engine) crowdTrack(running []*state.Attempt, now time.Time) {
	if len(running) == len(e.crowds.of) {
		return // the common case: every one is
	}
	for _, a := range running {
		e.crowdJoin(a, now, false)
	}
}

// crowdRefresh closes, for every attempt on cards, the stretch of its run it has had
// its present neighbours, and finds its neighbours and pace from now. A card's load is
// added up once for the attempts that run on it alone: each of a card's k attempts
// reading it again made every start and end cost k² lookups.
func (e *Engine) crowdRefresh(cards []plans.CardID, now time.Time) {
	for _, card := range cards {
		k, pace := crowdOn(e.cardLoad(card))
		for _, c := range e.crowds.on[card] {
			if len(c.cards) == 1 {
				c.stretch(now, k, pace)
			} else {
				e.crowdStretch(c, now)
			}
		}
	}
}

// crowdStretch closes the stretch of c's run it has had its present neighbours, and
// finds its neighbours and pace from now: the most attempts on any of its cards, and
// the slowest pace of them.
func (e *Engine) crowdStretch(c *crowd, now time.Time) {
	k, pace := 0.0, 1.0
	for _, mine := range c.cards {
		ck, cp := crowdOn(e.cardLoad(mine))
		k, pace = max(k, ck), min(pace, cp)
	}
	c.stretch(now, k, pace)
}

// crowdOn is what a card's load, n attempts of util together, is to each of them:
// its neighbours and its pace.
func crowdOn(n int, util float64) (k, pace float64) {
	return max(0, float64(n)), min(1, pack.Speed(util, n, 0))
}

// stretch closes the stretch of c's run until now, and starts the next at k attempts
// on its busiest card and pace. An end dated before the stretch began (an attempt lost
// while no daemon ran is dated by its files, and a neighbour may have started since)
// closes none of it: the next starts where it began.
func (c *crowd) stretch(now time.Time, k, pace float64) {
	if now.After(c.since) {
		dt := now.Sub(c.since).Seconds()
		c.kSum += c.k * dt
		c.paceSum += c.pace * dt
		c.since = now
	}
	c.k, c.pace = k, pace
}

// crowdRefreshUtil refreshes what the running attempts of the shapes count at, where
// that changed (what is learned of a shape, or of its sweep's busiest, changed it), and
// the cards they run on: the attempts beside them run at another pace from now. Every
// other attempt's neighbours count as they did.
func (e *Engine) crowdRefreshUtil(shapes func(yield func(string) bool)) {
	var cards []plans.CardID
	seen := map[plans.CardID]bool{}
	for shape := range shapes {
		util, known, planned := e.utilCounts(shape, e.store.KnownShape(shape))
		for _, c := range e.crowds.shapes[shape] {
			// What it counts at beside other sweeps' jobs changes no pace, which
			// cardLoad reckons from util alone.
			c.planned = planned
			if c.util == util && c.known == known {
				continue
			}
			c.util, c.known = util, known
			for _, card := range c.cards {
				if !seen[card] {
					seen[card] = true
					cards = append(cards, card)
				}
			}
		}
	}
	e.foreignAgain(cards)
	e.crowdRefresh(cards, e.clock.Now())
}

// foreignAgain reads again what processes that are not gpuq's keep busy on cards (see
// foreignOn) where the crowd read it of the cards as they are read now, as what gpuq's
// attempts there count at changed: where NVML gives no process on the card a figure
// of its own, the card's figure beyond what they count at is the others'. An attempt
// counted as the whole card until its shape was measured left the others nothing;
// measured at 40%, it leaves them the rest of the card's 100%, at this very reading,
// to the crowd and the packer alike.
func (e *Engine) foreignAgain(cards []plans.CardID) {
	cs := &e.crowds
	if cs.foreignRead != e.readings || len(e.owners.strangers) == 0 {
		return
	}
	for _, id := range cards {
		i, ok := e.cardAt(id.Worker, id.Index)
		if !ok {
			continue
		}
		if _, found := slices.BinarySearch(e.owners.strangers, i); !found {
			continue
		}
		if f := e.foreignOn(i); f.n > 0 {
			cs.foreign[id] = f
		} else {
			delete(cs.foreign, id)
		}
	}
}

// crowdShape yields one shape, for crowdRefreshUtil.
func crowdShape(shape string) func(yield func(string) bool) {
	return func(yield func(string) bool) { yield(shape) }
}

// crowdSweep yields the shapes of a sweep with attempts running, for crowdRefreshUtil.
func (e *Engine) crowdSweep(sweep string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for shape := range e.crowds.shapes {
			if s, _, _ := strings.Cut(shape, "\x00"); s == sweep && !yield(shape) {
				return
			}
		}
	}
}

// cardLoad is how many followed attempts run on a card and what they ask of its
// compute together, by their shapes' utilizations, with what processes that are not
// gpuq's keep busy there (see crowdForeign): another user's trainer slows gpuq's as
// much as one of gpuq's would.
func (e *Engine) cardLoad(card plans.CardID) (n int, util float64) {
	n, util = e.ownLoad(card)
	f := e.crowds.foreign[card]
	return n + f.n, util + f.util
}

// ownLoad is cardLoad of gpuq's followed attempts alone.
func (e *Engine) ownLoad(card plans.CardID) (n int, util float64) {
	cs := e.crowds.on[card]
	for _, c := range cs {
		util += c.util
	}
	return len(cs), util
}

// busyForeign is the least share of a card's compute a process that is not gpuq's
// must keep busy to count as company: memory alone is not compute, and a notebook
// between cells, holding its tensors and reading a point or two, slows nobody.
const busyForeign = 0.05

// foreignNear is how far what processes that are not gpuq's keep busy on a card may move
// from a round to the next, their count the same, and be counted as it was: their
// figures are whole percents of NVML's means, which move a point or so at nearly every
// reading, and each move closed the stretch of every attempt on the card (see
// crowdForeign) every round, for a pace that moved by as little.
const foreignNear = 0.015

// near reports whether f is what c is to the crowd: as many, within foreignNear.
func (c company) near(f company) bool {
	return c.n == f.n && math.Abs(c.util-f.util) < foreignNear
}

// crowdForeign reads, of the cards as the round read them, what processes that are
// not gpuq's keep busy on each (see foreignOn), and where that changed (by more than
// foreignNear), closes the stretch of every attempt there and finds its neighbours and
// pace from now: a run beside another user's trainer shares its card as much as a run
// beside one of gpuq's attempts does, and is not learned as a run alone. Only the cards
// that list a process of no attempt are looked up (the round's strangers, see
// resolveOwners): the simulator's never have any, and a fleet's thousands of cards,
// each running gpuq's attempts alone, were each looked through every round.
//
// Where the card's own figure speaks for them (see foreignOn), what it leaves them
// depends on what gpuq's attempts there count at, as of this call, before the round
// learns anything (readMetrics, learnPeaks): foreignAgain reads again only the cards of
// the shapes whose figure changed then, and attempts that end or start later in the
// round do not have their cards read again. The figure may then be off for a round,
// and is read right at the next one.
func (e *Engine) crowdForeign(now time.Time) {
	cs := &e.crowds
	next := cs.foreignWas
	clear(next)
	cs.foreignRead = e.readings
	for _, i := range e.owners.strangers {
		if f := e.foreignOn(i); f.n > 0 {
			next[e.cards[i].ID()] = f
		}
	}
	if len(next) == 0 && len(cs.foreign) == 0 {
		return
	}
	var changed []plans.CardID
	for id, f := range next {
		if was, ok := cs.foreign[id]; ok && was.near(f) {
			// Moved by less than foreignNear: the crowd and the packer count it as it
			// was, and a drift shows once it has moved by more from that.
			next[id] = was
			continue
		}
		changed = append(changed, id)
	}
	for id := range cs.foreign {
		if _, ok := next[id]; !ok {
			changed = append(changed, id)
		}
	}
	cs.foreign, cs.foreignWas = next, cs.foreign
	// In the cards' order, not the maps'.
	slices.SortFunc(changed, func(a, b plans.CardID) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Index, b.Index))
	})
	e.crowdRefresh(changed, now)
}

// foreignAt is what processes that are not gpuq's keep busy on the card at position i,
// as the crowd counts it (see crowdForeign) where it read the cards as they are read
// now, which a round's packing does: the packer counts the very figure that slows
// gpuq's attempts there (see cardStatesOf). Cards read since (gpuq plan's Preview reads
// them without a round) are read here.
func (e *Engine) foreignAt(i int) company {
	if e.readings > 0 && e.crowds.foreignRead == e.readings {
		return e.crowds.foreign[e.cards[i].ID()]
	}
	return e.foreignOn(i)
}

// foreignOn is what processes that are not gpuq's keep busy on the card at position i:
// those NVML lists whose owner is none of gpuq's attempts (another user's, another
// gpuq's). Each that keeps busyForeign of the card or more by its own figure counts as
// one. A process NVML gives no figure for (gpu.NoReading) ran no kernel over the
// window its figures are of (a notebook between cells, holding its tensors), where
// another process on the card has a figure (NVML keeps them there): it counts as
// nothing. Only where no process on the card has one (a driver or container without
// them) does the card's own figure speak for those of no attempt: they count as one
// together, at what the card's figure (its mean since it lists these processes, where
// that spans busyOver; else its utilization of the moment) has beyond what gpuq's
// attempts there count at (see gpuqOn), where that is busyForeign or more. A process
// whose owner this PID namespace cannot tell (Hidden) could be gpuq's own trainer: it
// counts as nothing.
func (e *Engine) foreignOn(i int) company {
	c := &e.cards[i]
	var f company
	if c.Fault != "" {
		return f
	}
	unread, figures := false, false
	for j, o := range e.ownersOf(i) {
		p := c.Processes[j]
		figures = figures || p.Util != gpu.NoReading
		switch {
		case o.attempt != "" || p.Hidden:
		case p.Util == gpu.NoReading:
			unread = true
		case float64(p.Util)/100 >= busyForeign:
			f.n++
			f.util += float64(p.Util) / 100
		}
	}
	if !unread || figures {
		return f
	}
	busy := c.Utilization
	if c.BusyOver >= busyOver {
		busy = c.Busy
	}
	if busy == gpu.NoReading {
		return f
	}
	if rest := min(float64(busy)/100, 1) - e.gpuqOn(i); rest >= busyForeign {
		f.n++
		f.util += rest
	}
	return f
}

// gpuqOn is what gpuq's attempts count at on the card at position i, where NVML gives
// no process there a figure of its own (see foreignOn), as the packer counts them:
// each the crowd follows there by its shape's figure, with what a planned sweep's job
// not measured yet counts at beside others' (crowd.planned: its plan has it count as
// nothing, and nothing of it is another user's); and an attempt the crowd no longer
// follows (one that ended, its trainer still stopping) whose process the card lists,
// by its shape's figures too, as it computes while it does.
func (e *Engine) gpuqOn(i int) float64 {
	c := &e.cards[i]
	on := e.crowds.on[c.ID()]
	var util float64
	for _, m := range on {
		util += m.util + m.planned
	}
	var seen []string
	for _, o := range e.ownersOf(i) {
		if o.attempt == "" || slices.Contains(seen, o.attempt) || slices.ContainsFunc(on, func(m *crowd) bool { return m.id == o.attempt }) {
			continue
		}
		seen = append(seen, o.attempt)
		if a := e.store.Latest().Attempt(o.attempt); a != nil {
			u, _, planned := e.utilCounts(a.Shape, e.store.KnownShape(a.Shape))
			util += u + planned
		}
	}
	return util
}
