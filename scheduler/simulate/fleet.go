package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Fleet is a cluster beyond one box, by simulation: Workers machines (gpuq workers) of
// CardsPerWorker cards of 80 GiB each, and Jobs jobs of Shapes shapes queued at once,
// drawn as shapes-1000.yaml's are. One engine schedules every card of every worker in
// its rounds, as a daemon with linked workers does.
type Fleet struct {
	Workers, CardsPerWorker, Jobs, Shapes int
	// Rounds is how many rounds to time after the first, which fills the cards; 0:
	// every round until no job waits, the queue drained.
	Rounds int
}

// ParseFleet reads "workers,cards per worker,jobs,rounds": a fleet of 1,000 shapes (or
// one a job, for fewer jobs); rounds 0 times every round until no job waits.
func ParseFleet(spec string) (Fleet, error) {
	f := Fleet{Shapes: 1000}
	var err error
	if fields := strings.Split(spec, ","); len(fields) != 4 {
		err = fmt.Errorf("%d numbers, not 4", len(fields))
	} else {
		for i, to := range []*int{&f.Workers, &f.CardsPerWorker, &f.Jobs, &f.Rounds} {
			if *to, err = strconv.Atoi(strings.TrimSpace(fields[i])); err != nil {
				break
			}
		}
	}
	if err != nil {
		return f, fmt.Errorf("fleet %q: want workers,cards per worker,jobs,rounds (e.g. 1000,8,1000000,0; rounds 0: until no job waits): %v", spec, err)
	}
	if f.Rounds < 0 {
		return f, fmt.Errorf("fleet %q: rounds %d: want a count of rounds, or 0 for every round until no job waits", spec, f.Rounds)
	}
	f.Shapes = min(f.Shapes, f.Jobs)
	return f, nil
}

// EarlyRounds is how many of the rounds after the first FleetResult.Early keeps apart:
// those before the cards crowd.
const EarlyRounds = 200

// FleetResult is what a fleet's simulation measured: wall and processor times.
type FleetResult struct {
	Fleet
	// Submit is putting the jobs in the store; First the first round, which starts a
	// job on every card or more.
	Submit, First time.Duration
	// Times are the rounds after the first, sorted, and CPU the processor time each
	// took (every thread's, the collector's included), sorted: on a machine others
	// share, a round's wall time counts the time it waited for a core. Early are the
	// times of the first EarlyRounds of them, sorted: as the queue drains, smaller jobs
	// crowd the cards, and every round has more attempts to reach.
	Times, CPU, Early []time.Duration
	// Running is the most attempts running after a round.
	Running int
	Started int // attempts started, in the first round and after
	// Filled is the cards with a trainer after the first round.
	Filled int
	// Idle counts the rounds after which a card had no trainer while the packer, asked
	// then, would have started a job: a worker idle while a job it could run waits.
	Idle int
	// HeapMiB is the live heap after the last round: the engine's state and the trace.
	HeapMiB uint64
	// Allocated is the bytes the rounds after the first allocated: unlike their times,
	// the same from run to run on a busy machine, and the collector's work to come.
	Allocated uint64
	// Handled is, for the rounds after the first in their order, how many attempts
	// each reaped and started and found running, beside its wall time: what a round's
	// time grows with.
	Handled []Handled
}

// Handled is one round's work: the attempts it reaped (their trainers ended) and
// started, those running when it began, its wall time and its processor time (every
// thread's).
type Handled struct {
	Ended, Started, Running int
	Took, CPU               time.Duration
}

// Attempts is how many attempts the round reaped or started.
func (h Handled) Attempts() int { return h.Ended + h.Started }

// BesideCollector reports whether the round ran beside the garbage collector's marking:
// its processor time past 1.2 times its wall, a second thread at work while it ran,
// which in a simulation that runs on one goroutine is the collector. A fleet's heap is
// its million jobs, over a gigabyte to mark, and a round beside the marking takes about
// twice as long: the marking takes the other core and the caches the round reads
// through, and every pointer the round writes passes a barrier. (Checked against the
// collector's own trace, GODEBUG=gctrace=1, of a fleet of 1,000 workers: 46 of the 48
// rounds during its marking, and 11 of the 1,115 others.)
func (h Handled) BesideCollector() bool { return h.CPU*5 > h.Took*6 }

// RoundCost is a round's wall time split, by least squares, into a part every round
// pays, a part for each attempt running when it began (each looked at, whatever it
// does), and a part for each attempt it reaped or started.
type RoundCost struct {
	Fixed, Running, Each time.Duration
}

// Of is what a round of running attempts that reaps and starts handled takes, by c.
func (c RoundCost) Of(running, handled int) time.Duration {
	return c.Fixed + time.Duration(running)*c.Running + time.Duration(handled)*c.Each
}

// Cost splits the rounds' wall times as RoundCost says, by least squares with no part
// below zero (a round cannot take less for more attempts, nor less than nothing); ok
// is false where the rounds do not tell the parts apart: fewer than three, or the
// running and the handled counts the same in every round, or rising together.
func Cost(rounds []Handled) (c RoundCost, ok bool) {
	if len(rounds) < 3 || allSame(rounds, func(x Handled) int { return x.Running }) || allSame(rounds, Handled.Attempts) {
		return c, false // told apart from the fixed part by nothing (a mean summed would not be exact)
	}
	n := float64(len(rounds))
	var mr, mh float64
	for _, x := range rounds {
		mr += float64(x.Running) / n
		mh += float64(x.Attempts()) / n
	}
	var srr, shh, srh float64
	for _, x := range rounds {
		r, h := float64(x.Running)-mr, float64(x.Attempts())-mh
		srr, shh, srh = srr+r*r, shh+h*h, srh+r*h
	}
	if srr == 0 || shh == 0 || srr*shh-srh*srh <= 0.01*srr*shh {
		return c, false // a correlation of the counts past 0.995 tells nothing apart
	}
	// The fit with no part below zero is the unconstrained fit on some set of the
	// parts, the others none: of the fits on each set that have no part below zero,
	// the closest.
	best := math.Inf(1)
	for parts := 1; parts < 1<<3; parts++ {
		coef, fitted := fitParts(rounds, parts)
		if !fitted || slices.ContainsFunc(coef[:], func(v float64) bool { return v < 0 }) {
			continue
		}
		var sse float64
		for _, x := range rounds {
			d := float64(x.Took) - coef[0] - coef[1]*float64(x.Running) - coef[2]*float64(x.Attempts())
			sse += d * d
		}
		if sse < best {
			best = sse
			c = RoundCost{Fixed: time.Duration(coef[0]), Running: time.Duration(coef[1]), Each: time.Duration(coef[2])}
		}
	}
	return c, !math.IsInf(best, 1)
}

// allSame reports whether count is the same of every round.
func allSame(rounds []Handled, count func(Handled) int) bool {
	return !slices.ContainsFunc(rounds, func(x Handled) bool { return count(x) != count(rounds[0]) })
}

// fitParts is the least squares fit of the rounds' times on the parts the bits of
// parts name (1: fixed, 2: each attempt running, 4: each reaped or started), the others
// 0: the normal equations, solved by elimination; fitted is false where they are
// singular.
func fitParts(rounds []Handled, parts int) (coef [3]float64, fitted bool) {
	var cols []int
	for k := range 3 {
		if parts&(1<<k) != 0 {
			cols = append(cols, k)
		}
	}
	x := func(h Handled, k int) float64 {
		switch k {
		case 0:
			return 1
		case 1:
			return float64(h.Running)
		}
		return float64(h.Attempts())
	}
	m := len(cols)
	var a [3][4]float64 // the normal equations, and their right side in column m
	for _, h := range rounds {
		for i, ki := range cols {
			for j, kj := range cols {
				a[i][j] += x(h, ki) * x(h, kj)
			}
			a[i][m] += x(h, ki) * float64(h.Took)
		}
	}
	for i := range m {
		p := i
		for r := i + 1; r < m; r++ {
			if math.Abs(a[r][i]) > math.Abs(a[p][i]) {
				p = r
			}
		}
		a[i], a[p] = a[p], a[i]
		if a[i][i] == 0 {
			return coef, false
		}
		for r := range m {
			if f := a[r][i] / a[i][i]; r != i && f != 0 {
				for j := i; j <= m; j++ {
					a[r][j] -= f * a[i][j]
				}
			}
		}
	}
	for i, k := range cols {
		coef[k] = a[i][m] / a[i][i]
	}
	return coef, true
}

// Quantile is the time below which a share q of sorted times are.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1))]
}

// cpuTime is the processor time the process has taken, in user and kernel mode.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// allocated is the bytes the process has allocated on the heap so far.
func allocated() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// trace draws the fleet's jobs: each shape's peak 2 to 40 GiB and duration 10 minutes
// to 3 hours (log-uniform), its estimate the peak give or take 20%, from a fixed seed.
func (f Fleet) trace() (*Trace, error) {
	if f.Workers < 1 || f.CardsPerWorker < 1 || f.Shapes < 1 || f.Jobs < f.Shapes {
		return nil, fmt.Errorf("fleet %+v: want workers, cards per worker and shapes ≥ 1, and at least one job a shape", f)
	}
	r := rand.New(rand.NewPCG(29, 1000))
	logUniform := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }
	var b strings.Builder
	// The trace is one worker's cards (its plan), the machine every worker's.
	fmt.Fprintf(&b, "name: fleet\ngpus: \"sim:%dx80GiB\"\nheadroom: 5%%\njobs:\n", f.CardsPerWorker)
	for s := range f.Shapes {
		peak := logUniform(2, 40)
		base := peak * (0.3 + 0.3*r.Float64())
		estimate := peak * (0.8 + 0.4*r.Float64())
		minutes := max(1, math.Round(logUniform(10, 180)))
		count := f.Jobs / f.Shapes
		if s < f.Jobs%f.Shapes {
			count++
		}
		fmt.Fprintf(&b, "  - {name: s%04d, estimate: %.2fGiB, base: %.2fGiB, activations: %.2fGiB, duration: %.0fm, count: %d}\n",
			s, estimate, base, peak-base, minutes, count)
	}
	return Decode("fleet.yaml", []byte(b.String()), plans.Overrides{})
}

// cardBytes is the memory of each of a fleet's cards.
const cardBytes = 80 << 30

// RunFleet simulates a fleet under gpuq's engine and times its first round and the
// Rounds after it, or, Rounds 0, every round after it until no job waits (a round after
// every moment a trainer ends, as Run's), checking after each whether a card was left
// idle that a waiting job could have had. A job put back in the queue after it emptied
// (a running attempt's OOM: a few in a fleet's 1,000,000) is not waited for.
func RunFleet(f Fleet) (FleetResult, error) {
	r := FleetResult{Fleet: f}
	fl, err := newFleetRun(f)
	if err != nil {
		return r, err
	}
	e, m, rn, store := fl.engine, fl.m, fl.rn, fl.store
	r.Submit = fl.submit
	round := func() (wall, cpu time.Duration, err error) {
		allocBegan := allocated()
		began, cpuBegan := time.Now(), cpuTime()
		err = e.Round(rn.ended)
		rn.ended = rn.ended[:0]
		wall, cpu = time.Since(began), cpuTime()-cpuBegan
		r.Allocated += allocated() - allocBegan
		return wall, cpu, err
	}
	if r.First, _, err = round(); err != nil {
		return r, err
	}
	r.Allocated = 0 // the rounds after the first's
	r.Running = len(rn.pids)
	for _, c := range m.cards {
		if len(c.running) > 0 {
			r.Filled++
		}
	}
	drained := func() bool { return f.Rounds == 0 && store.Queue().Len() == 0 }
	for !drained() && (f.Rounds == 0 || len(r.Times) < f.Rounds) {
		ended, more := m.step()
		if !more {
			break
		}
		if !ended && rn.teaching == 0 {
			continue
		}
		h := Handled{Ended: len(rn.ended), Started: m.pid, Running: len(rn.pids)}
		took, cpu, err := round()
		if err != nil {
			return r, err
		}
		h.Started, h.Took, h.CPU = m.pid-h.Started, took, cpu
		r.Times, r.CPU, r.Handled = append(r.Times, took), append(r.CPU, cpu), append(r.Handled, h)
		if idle, err := idleWhileWaiting(e, m); err != nil {
			return r, err
		} else if idle {
			r.Idle++
		}
		r.Running = max(r.Running, len(rn.pids))
	}
	r.Early = firstSorted(r.Times, EarlyRounds) // before Times is sorted
	slices.Sort(r.Times)
	slices.Sort(r.CPU)
	r.Started = m.pid
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.HeapMiB = ms.HeapAlloc >> 20
	runtime.KeepAlive(store)
	return r, nil
}

// firstSorted is the first n of times (all, if fewer), sorted, in an array of its own.
func firstSorted(times []time.Duration, n int) []time.Duration {
	first := slices.Clone(times[:min(n, len(times))])
	slices.Sort(first)
	return first
}

// fleetRun is a fleet's engine on its simulated cards, its jobs submitted, before its
// first round.
type fleetRun struct {
	engine *scheduler.Engine
	m      *machine
	rn     *engineRunner
	store  *state.Store
	submit time.Duration // how long the submission took
}

func newFleetRun(f Fleet) (*fleetRun, error) {
	t, err := f.trace()
	if err != nil {
		return nil, err
	}
	m := newMachine(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: f.Workers * f.CardsPerWorker, Bytes: cardBytes}}})
	store, err := state.NewStore()
	if err != nil {
		return nil, err
	}
	rn := &engineRunner{m: m, trace: t, store: store, pids: map[string]int{}, curves: map[string]*curveRun{}}
	inv := newFleetCards(m, rn, f, t.Slots())
	rn.where = inv.positions
	began := time.Now()
	if err := store.Submit(&state.Submission{Sweep: t.Sweep}); err != nil {
		return nil, err
	}
	submit := time.Since(began)
	cfg := scheduler.Config{Headroom: t.Sweep.Headroom, SaveMeasures: math.MaxInt64, UtilTarget: t.Sweep.UtilTarget}
	rn.engine = scheduler.NewEngine(store, inv, rn.withCurves(), virtualClock{m}, cfg, nil)
	return &fleetRun{engine: rn.engine, m: m, rn: rn, store: store, submit: submit}, nil
}

// idleWhileWaiting reports whether a card has no trainer while the packer would start
// a job now. It asks the packer only when a card is idle: that costs a round.
func idleWhileWaiting(e *scheduler.Engine, m *machine) (bool, error) {
	if !slices.ContainsFunc(m.cards, func(c simCard) bool { return len(c.running) == 0 }) {
		return false, nil
	}
	d, _, err := e.Preview()
	return len(d.Placements) > 0, err
}

// fleetCards are the machine's cards dealt to workers in order, CardsPerWorker each,
// as the engine sees a cluster's: known by worker and index, each process named by
// the attempt it runs (as a worker reports them). RAM is not simulated: plenty.
type fleetCards struct {
	m       *machine
	rn      *engineRunner
	per     int
	workers []string // by position / per
	base    map[string]int
	slots   []int // a worker's plan, by index
}

func newFleetCards(m *machine, rn *engineRunner, f Fleet, slots []int) *fleetCards {
	c := &fleetCards{m: m, rn: rn, per: f.CardsPerWorker, base: map[string]int{}, slots: slots}
	for w := range f.Workers {
		name := fmt.Sprintf("w%04d", w)
		c.workers = append(c.workers, name)
		c.base[name] = w * f.CardsPerWorker
	}
	return c
}

func (c *fleetCards) Read() ([]gpu.Card, error) {
	cards, err := c.m.Read()
	for i := range cards {
		cards[i].Worker, cards[i].Index = c.workers[i/c.per], i%c.per
		for k, p := range cards[i].Processes {
			cards[i].Processes[k].Attempt = c.rn.attempt(p.PID)
		}
	}
	return cards, err
}

func (c *fleetCards) Slots(card gpu.Card) int { return c.slots[card.Index] }

func (c *fleetCards) Host(string) (total, available int64, err error) { return 1 << 40, 1 << 40, nil }

func (c *fleetCards) Ends(string) time.Time { return time.Time{} }

// positions are an attempt's cards among the machine's.
func (c *fleetCards) positions(a *state.Attempt) []int {
	at := make([]int, len(a.GPUs))
	for i, g := range a.GPUs {
		at[i] = c.base[a.Worker] + g
	}
	return at
}
