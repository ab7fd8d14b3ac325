package simulate

import (
	"container/heap"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// machine is the simulated cards and the trainers on them, in virtual time. A trainer
// reaches its peak AllocateAfter its start (all at once), holds it to its end, and runs
// out of memory then if its card's allocated peaks would exceed the card: the one
// allocating loses, as with real trainers. Trainers sharing a card slow each other
// down by the compute they take of it (see rates.go).
type machine struct {
	now    time.Duration // since the simulation began
	cards  []simCard
	events eventQueue
	seq    uint64
	pid    int
	// cost is the trace's colocation_cost: what each trainer loses to each other one on
	// its card, whatever their utilizations.
	cost float64

	capacity int64   // all cards' memory
	held     int64   // allocated on all cards now
	memTime  float64 // byte-seconds held, integrated over time
	ooms     int
	last     time.Duration // when the last trainer ended
	// mostPerCard is the most trainers that held one card at once.
	mostPerCard int
	// wakes are the moments a wake event is due at.
	wakes map[time.Duration]bool
	read  []gpu.Card // what Read returned last
}

type simCard struct {
	total    int64
	held     int64
	trainers []*trainer // those that have allocated, in the order they did
	// running are the trainers computing on the card, allocated or not, and util the
	// sum of their utilizations.
	running []*trainer
	util    float64
	// listed is when trainers last changed: since then the card has been as busy as
	// they keep it (see Read).
	listed time.Duration
}

// trainer is one simulated attempt.
type trainer struct {
	pid       int
	cards     []int // positions in machine.cards
	peak      int64 // per card
	util      float64
	started   time.Duration
	duration  time.Duration
	allocated bool
	ended     bool
	done      func(plans.Outcome, *plans.OOMFacts)
	// progress is how its work goes (see rates.go).
	progress
}

type eventKind int

const (
	allocate eventKind = iota
	finish
	stop
	wake // nothing happens to a trainer: the engine has a round (a timeout is due)
)

type event struct {
	at   time.Duration
	seq  uint64 // ties in time go in the order events were made
	kind eventKind
	t    *trainer
	// gen is the trainer's timing the event was made for: a finish made before its
	// rate changed is stale (see retime).
	gen uint64
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func newMachine(spec plans.GPUSpec) *machine {
	m := &machine{}
	for _, g := range spec.Simulated {
		for range g.Count {
			m.cards = append(m.cards, simCard{total: g.Bytes})
			m.capacity += g.Bytes
		}
	}
	return m
}

func (m *machine) at(after time.Duration, kind eventKind, t *trainer) {
	m.seq++
	e := event{at: m.now + after, seq: m.seq, kind: kind, t: t}
	if t != nil {
		e.gen = t.gen
	}
	heap.Push(&m.events, e)
}

// start launches a trainer on cards, with d its duration alone and util the share of a
// card's compute it keeps busy then; done is called once, when it ends.
func (m *machine) start(cards []int, peak int64, d time.Duration, util float64, done func(plans.Outcome, *plans.OOMFacts)) int {
	m.pid++
	t := &trainer{pid: m.pid, cards: cards, peak: peak, util: util, started: m.now, duration: d, done: done}
	t.progress = progress{left: d, since: m.now, rate: 1}
	m.at(min(AllocateAfter, d/2), allocate, t)
	m.join(t)
	return t.pid
}

// wakeAt makes step return at a moment (now, if it has passed) as if a trainer ended
// then, so that the engine has a round.
func (m *machine) wakeAt(at time.Duration) {
	at = max(at, m.now)
	if m.wakes[at] {
		return
	}
	if m.wakes == nil {
		m.wakes = map[time.Duration]bool{}
	}
	m.wakes[at] = true
	m.at(at-m.now, wake, nil)
}

// stop ends a trainer now, as cancelled.
func (m *machine) stop(pid int) {
	for _, e := range m.events {
		if e.t != nil && e.t.pid == pid && !e.t.ended {
			m.at(0, stop, e.t)
			return
		}
	}
}

// step advances to the next moment something happens and makes it happen. It returns
// whether a trainer ended then, and false for more when nothing is left to happen.
func (m *machine) step() (ended, more bool) {
	if len(m.events) == 0 {
		return false, false
	}
	m.advance(m.events[0].at)
	for len(m.events) > 0 && m.events[0].at == m.now {
		e := heap.Pop(&m.events).(event)
		if e.kind == wake {
			delete(m.wakes, e.at)
			ended = true
			continue
		}
		if e.t.ended || e.kind == finish && e.gen != e.t.gen {
			continue
		}
		switch e.kind {
		case allocate:
			ended = !m.allocate(e.t) || ended
		case finish:
			m.end(e.t, plans.Success, nil)
			ended = true
		case stop:
			m.end(e.t, plans.Cancelled, nil)
			ended = true
		}
	}
	return ended, true
}

// run makes everything happen that is left to happen.
func (m *machine) run() {
	for _, more := m.step(); more; _, more = m.step() {
	}
}

func (m *machine) advance(to time.Duration) {
	m.memTime += float64(m.held) * (to - m.now).Seconds()
	m.now = to
}

// allocate gives a trainer its peak, or ends it out of memory and returns false.
func (m *machine) allocate(t *trainer) bool {
	for _, i := range t.cards {
		c := &m.cards[i]
		if c.held+t.peak > c.total {
			m.ooms++
			m.end(t, plans.GPUOOM, m.oomFacts(c, t))
			return false
		}
	}
	for _, i := range t.cards {
		c := &m.cards[i]
		c.held += t.peak
		c.trainers = append(c.trainers, t)
		c.listed = m.now
		m.mostPerCard = max(m.mostPerCard, len(c.trainers))
		m.held += t.peak
	}
	t.allocated = true
	m.at(t.finishIn(m.now), finish, t)
	return true
}

// oomFacts is what PyTorch's message would tell: what the trainer held and tried to
// allocate (together its true peak), the card's size and free memory, and the others.
func (m *machine) oomFacts(c *simCard, t *trainer) *plans.OOMFacts {
	free := max(c.total-c.held, 0)
	used := min(free, t.peak/2)
	f := &plans.OOMFacts{Signature: "simulated", Device: 0, TriedBytes: t.peak - used, TotalBytes: c.total,
		FreeBytes: free - used, ProcessBytes: used}
	for _, o := range c.trainers {
		f.Others = append(f.Others, plans.ProcessUse{PID: o.pid, Bytes: o.peak})
	}
	return f
}

func (m *machine) end(t *trainer, o plans.Outcome, f *plans.OOMFacts) {
	t.ended = true
	m.leave(t)
	if t.allocated {
		for _, i := range t.cards {
			c := &m.cards[i]
			c.held -= t.peak
			m.held -= t.peak
			for k, x := range c.trainers {
				if x == t {
					c.trainers = append(c.trainers[:k], c.trainers[k+1:]...)
					c.listed = m.now
					break
				}
			}
		}
	}
	m.last = m.now
	t.done(o, f)
}

// utilization is the share of the cards' memory held, averaged over the makespan.
func (m *machine) utilization() float64 {
	if m.last <= 0 || m.capacity == 0 {
		return 0
	}
	return m.memTime / (float64(m.capacity) * m.last.Seconds())
}

// Read reads the cards as NVML would: memory in use and the processes holding it, the
// card's utilization (the busy share of its compute, min(1, Σu)) and each process's (its
// utilization, scaled down by its share where the card is oversubscribed). The card's
// mean since its processes last changed (Busy) is what they keep busy together: a
// trainer that has not allocated yet shows no process, and its share is not the card's
// to tell.
// It fills the same slices each time: the engine keeps a reading only until its next.
func (m *machine) Read() ([]gpu.Card, error) {
	if m.read == nil {
		m.read = make([]gpu.Card, len(m.cards))
	}
	for i, c := range m.cards {
		procs := m.read[i].Processes[:0]
		busy := 0.0
		for _, t := range c.trainers {
			procs = append(procs, gpu.Process{PID: t.pid, Used: t.peak, Util: percent(t.util * c.share())})
			busy += t.util * c.share()
		}
		m.read[i] = gpu.Card{Index: i, Total: c.total, Used: c.held, Processes: procs,
			Utilization: percent(min(1, c.util)), Temperature: gpu.NoReading}
		if len(procs) > 0 {
			m.read[i].Busy, m.read[i].BusyOver = percent(min(1, busy)), m.now-c.listed
		}
	}
	return m.read, nil
}
