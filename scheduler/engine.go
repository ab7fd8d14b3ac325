// Package scheduler is gpuq's engine: it runs rounds (read the cards, learn what the
// running attempts hold, pack the queue, start what is placed), applies how attempts
// end (the OOM ladder), and does what people ask of it (cancel, hold, drain, why).
// It packs with scheduler/pack and keeps what it knows in scheduler/state, whose one
// writer it is while it runs; it meets the processes it starts through a Runner.
package scheduler

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Clock is the engine's time: real under `gpuq run`, virtual under a simulation.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the wall-clock time.
func (RealClock) Now() time.Time { return time.Now() }

// After waits d of wall-clock time.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Inventory reads the cards.
type Inventory interface {
	Read() ([]gpu.Card, error)
}

// Cluster is an Inventory whose cards are on several machines, this one and gpuq
// workers on other nodes, each with its own plan, RAM and end: the engine takes each
// card's slots, each machine's RAM and time left from it, rather than from Config's
// Slots and Host, which are one machine's.
type Cluster interface {
	Inventory
	// Slots is the plan's limit on a card of the last Read.
	Slots(c gpu.Card) int
	// Host reads the RAM of a machine (a card's Worker) as Config.Host reads this one's.
	Host(worker string) (total, available int64, err error)
	// Ends is when a machine stops taking jobs (a worker's allocation ends); zero: never.
	Ends(worker string) time.Time
}

// Keeper is a Cluster that keeps cards it does not read now: those of a worker that is
// away (its link lost), which may be back within its grace. A person may drain or
// undrain such a card meanwhile: the drain is their intent about the card, for when it
// is back.
type Keeper interface {
	// Keeps reports whether card is one of a machine that is away, not gone.
	Keeps(card plans.CardID) bool
	// Away are the cards of the machines away, not gone, in order: those a drain may
	// name beside the round's.
	Away() []plans.CardID
}

// Launch is what a Runner needs to start an attempt.
type Launch struct {
	Attempt    *state.Attempt
	Job        *state.Job
	Submission *state.Submission // the job's sweep, and the environment it was submitted from
	Cards      []gpu.Card
	// Sharing is how many trainers run once this round's have started, this one
	// included: threads: auto divides the cores by it.
	Sharing int
}

// Runner starts attempts and reports, on its Exits channel, how each ended.
type Runner interface {
	// Start starts the attempt and says where it runs and logs.
	Start(l Launch) (Started, error)
	// Stop asks a running attempt to end; its Exit follows.
	Stop(a *state.Attempt)
	// Owner returns the attempt a process belongs to, so that the engine can tell its
	// attempts' processes from foreign ones; ok is false for a process of none.
	Owner(pid int) (attempt string, ok bool)
	// Exits is where the runner reports how attempts ended. A runner whose driver
	// applies exits itself (a simulation) may return nil.
	Exits() <-chan Exit
}

// Adopter is a Runner whose attempts outlive the engine that started them (each under
// a supervisor of its own): a later engine on the same state takes them up (see
// Engine.Adopt).
type Adopter interface {
	// Adopt takes up an attempt that was running when the last engine stopped, and
	// reports its end on Exits as for one it started. It returns what it knows of the
	// attempt now; an attempt whose trainer never started is reported ended with
	// Exit.Unstarted.
	Adopt(a *state.Attempt) Started
}

// Concurrent is a Runner that can start several attempts at once: one whose start waits
// for a process of its own to start the trainer (a supervisor) spends most of that wait
// on the process's work, not its own, and a round starting each attempt in turn waits
// the sum of them. Its Start must be safe to call from several goroutines.
type Concurrent interface {
	// StartsAtOnce is how many starts may be under way together.
	StartsAtOnce() int
}

// HostMeter is a Runner that can measure host memory: what the processes of each of its
// attempts hold now, by attempt id. Attempts it cannot measure are left out.
type HostMeter interface {
	HostMemory() map[string]int64
}

// Started is what a Runner tells of an attempt it started.
type Started struct {
	Leader  int      // the trainer's pid
	Log     string   // the attempt's log file
	Command []string // the argv it runs; nil where not known yet
	// At is when the trainer started, where the runner knows better than the engine
	// (a supervisor said so); zero: when Start returned.
	At time.Time
}

// Exit is how an attempt ended, as its Runner reports it.
type Exit struct {
	Attempt string
	Outcome plans.Outcome
	OOM     *plans.OOMFacts
	Detail  string // e.g. "exited with status 2"
	// Unstarted: the attempt was recorded but its trainer never started (a daemon
	// died in between); the job goes back to the queue as it was.
	Unstarted bool
	// Requeue: the attempt was lost with the machine it ran on (a gpuq worker that did
	// not come back); the job goes back to the queue as it was, as for Unstarted.
	Requeue bool `json:",omitempty"`
	// At is when the runner learned of the end, as the engine's clock reads; zero:
	// when it is applied. Ends that arrive while a round starts attempts are applied
	// after it, and a short job's learned duration is not that wait.
	At time.Time `json:",omitzero"`
	// Process is how its trainer's process ended, where one ran; Command the argv it
	// ran (nil where not known).
	Process *plans.ProcessExit `json:",omitempty"`
	Command []string           `json:",omitempty"`
}

// Event is something that happened, for the user interface.
type Event struct {
	Time    time.Time
	Job     string // or the card ("GPU 3") an event of the machine is about
	Attempt int
	Kind    string // "started", "gpu-oom", "requeued", "succeeded", "failed", "cancelled", "out-of-service", ...
	Message string
}

// Text is the event in a line, without its time: "gla.3 #2 gpu-oom: ...", the
// attempt's number where it is one's, the message where there is one (a hold has none).
func (ev Event) Text() string {
	line := ev.Job
	if ev.Attempt > 0 {
		line += " #" + strconv.Itoa(ev.Attempt)
	}
	line += " " + ev.Kind
	if ev.Message != "" {
		line += ": " + ev.Message
	}
	return line
}

// Config is the machine side of an engine.
type Config struct {
	Slots    []int // the plan, fitted to the inventory's cards
	Headroom plans.Headroom
	// Poll is how often the engine samples the cards between events.
	Poll time.Duration
	// Settle bounds how long a card waits, after an attempt on it ends, for NVML to stop
	// showing that attempt's memory before another job starts there.
	Settle time.Duration
	// LearnAfter is how long an attempt must run before its measured peak speaks for
	// its shape; a finished attempt's always does.
	LearnAfter time.Duration
	// SaveMeasures is how long the engine may keep what it measured of a running attempt
	// (its peaks, its memory over time) before writing it to the store; an attempt's end
	// writes it at once. The engine reads its own measures at once either way: only
	// readers of the store (status, reports) and the journal see them late, and a daemon
	// that dies loses what it measured of its running attempts in that time (its shapes
	// keep what they learned: learning writes the shape). 0 writes them every round.
	SaveMeasures time.Duration
	// Host reads the machine's RAM; nil leaves host memory out of the packing.
	Host func() (total, available int64, err error)
	// Trainer reports whether a process on this machine's cards, of none of the
	// engine's attempts, is a trainer of another gpuq (a gpuq run beside the daemon, the
	// daemon's beside gpuq plan): its memory is others' (pack.CardState.Foreign) but
	// passing (Passing), as a trainer ends. nil: none is.
	Trainer func(pid int) bool
	// HostHeadroom is the RAM kept for the system, as Headroom is each card's memory
	// kept free (an attempt's HostReserve is what is reserved for it).
	HostHeadroom plans.Headroom
	// Rounds, if set, hears how long each round of Run's or Serve's loop took, in
	// wall-clock time, for metrics.
	Rounds func(took time.Duration)
	// UtilTarget is how much of a card's compute the jobs sharing it may ask for
	// together, by their shapes' measured utilizations (see pack.Speed): 0 takes
	// pack.DefaultTarget, the whole card; below 0, none is counted, and memory and
	// slots alone decide how many share a card.
	UtilTarget float64
}

// Engine runs jobs to the end: it packs, starts attempts, and reacts to how they end.
type Engine struct {
	store  *state.Store
	inv    Inventory
	runner Runner
	clock  Clock
	cfg    Config
	// events tells of events; during a batch (see batch) they wait in later, to be told
	// once what they report is in the store.
	events, tell func(Event)
	later        []Event
	// heard is whether anyone listens to the events: a round that starts thousands
	// (a fleet's simulation, which listens to none) need not word them.
	heard  bool
	ghosts []ghost
	cards  []gpu.Card
	// cardPos maps a card to its position in cards, workerAt a machine to the position
	// of its first card there (see cardAt).
	cardPos  map[plans.CardID]int
	workerAt map[string]int
	// cardIDs is the cards of the reading cardPos was made from, in its order, and
	// cardsRead counts the readings that changed them (see positions).
	cardIDs   []plans.CardID
	cardsRead uint64
	// readings counts the cards' readings, each (see readCards): whether the crowd's
	// figure of what processes that are not gpuq's keep busy is of the cards as read
	// now (see foreignAt).
	readings uint64
	// largest is the memory of the largest of those cards, which the queue weighs a
	// job's share of a card by (see state.Queue.SetCards).
	largest int64
	// idle is the least NVML counted as used on each card of the reading with nothing
	// on it (see idleUse), with the card it was learned of, and idleAt the same by the
	// card's position (-1: not read idle yet). idleUnsaved is what was learned since
	// the store last kept it, and idleGone the cards whose idle use it is to forget
	// (see saveIdle).
	idle        map[plans.CardID]state.IdleUse
	idleAt      []int64
	idleUnsaved []state.IdleUse
	idleGone    []plans.CardID
	// began is when the engine was made (see pruneIdle).
	began time.Time
	// owners is whose each process on the cards is, resolved once per round (see
	// resolveOwners); ownersWere is the last round's, emptied and filled again.
	owners, ownersWere *ownership
	// resolved counts the resolutions of owners, and changedAt is, for the card at
	// each position, the one at which it last read otherwise (see resolveOwners).
	resolved  uint64
	changedAt []uint64
	// own is a round's attempts of its own (see ours).
	own ownSet
	// roundRunning holds a round's running attempts (see roundRunningNow), roundKept
	// them as stored, and roundBufs their cards and their ends (see packView).
	roundRunning []*state.Attempt
	roundKept    roundKept
	roundBufs    packViewBufs
	// roundPasses is a round's notes of its passes (see place), emptied and filled
	// again each round: made anew, their maps grew to a fleet's thousands of shapes
	// from nothing every round.
	roundPasses passes
	// slotsNow is the cluster's limit on each card, as slots last read it.
	slotsNow []int
	// unsaved is what was measured of running attempts and not yet written; savedAt
	// is when it was last written.
	unsaved measures
	savedAt time.Time
	// hostNow is what each running attempt's processes hold of host RAM, by attempt.
	hostNow map[string]int64
	// faults are the cards out of service at the last reading, and why.
	faults map[plans.CardID]string
	// hidden are the processes NVML listed at the last reading that this PID namespace
	// does not have; unattributed, that gpuq has said what that means.
	hidden       map[proc]bool
	unattributed bool
	// lastRound is when the last round sampled the cards.
	lastRound time.Time
	// head is the job cards were reserved for at the last round.
	head head
	// commands are people's requests (cancel, hold, drain...), run between rounds (see
	// Do).
	commands chan func()
	// reads are requests that only read (why), which a round also answers between two
	// starts of attempts (see answer): one that starts many takes seconds.
	reads chan func()
	// looping is set once Run or Serve has started the loop, and stopped is closed when
	// it has returned.
	looping atomic.Bool
	stopped chan struct{}
	// err is the first failure to journal a change that is not the disk's: the
	// engine stops at the end of the round, having done nothing it could not record.
	err error
	// paused is why gpuq cannot write now, while it cannot; pending are the ends of
	// attempts that could not be recorded meanwhile (see pause.go).
	paused  *state.CannotWrite
	pending []Exit
	// after are the jobs that wait for what they run after (see after.go).
	after awaiting
	// metricsSavedAt is when the running attempts' metrics were last written (see
	// save); boards are the standings of the sweeps with early_stop, by sweep (see
	// boardOf).
	metricsSavedAt time.Time
	boards         map[string]*board
	// crowds follows who shares each card (see crowd.go); plannedSweeps is whether
	// each sweep writes a gpu_plan (see planned), busiest the most any shape of each
	// keeps busy of a card, as measured (see busiestOf).
	crowds        crowds
	plannedSweeps map[string]bool
	busiest       map[string]float64
	busiestRead   bool // busiest holds what the store kept (see busiestOf)
}

// proc is a process on a machine: pids are a machine's own.
type proc struct {
	worker string
	pid    int
}

// ghost is an ended attempt whose memory NVML may still show.
type ghost struct {
	attempt *state.Attempt
	until   time.Time
}

// NewEngine returns an engine over the store's jobs. events may be nil.
func NewEngine(store *state.Store, inv Inventory, runner Runner, clock Clock, cfg Config, events func(Event)) *Engine {
	heard := events != nil
	if !heard {
		events = func(Event) {}
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	if cfg.LearnAfter == 0 {
		cfg.LearnAfter = 5 * time.Minute
	}
	e := &Engine{store: store, inv: inv, runner: runner, clock: clock, cfg: cfg,
		tell: events, owners: &ownership{}, ownersWere: &ownership{}, unsaved: newMeasures(), cardPos: map[plans.CardID]int{}, workerAt: map[string]int{}, idle: map[plans.CardID]state.IdleUse{},
		hostNow: map[string]int64{}, faults: map[plans.CardID]string{}, commands: make(chan func()), reads: make(chan func()), stopped: make(chan struct{}),
		crowds: newCrowds(), plannedSweeps: map[string]bool{}, busiest: map[string]float64{}, heard: heard, began: clock.Now()}
	e.events = func(ev Event) {
		if !heard { // nobody listens (a simulation): nothing to keep for the batch's end
			return
		}
		if e.store.InBatch() {
			e.later = append(e.later, ev)
			return
		}
		e.tell(ev)
	}
	return e
}

// batch runs fn with what it writes to the store gathered in one transaction (see
// Store.Batch), and tells the events of fn once they are in the store, for whoever
// reads it when told (the daemon's hooks and metrics).
func (e *Engine) batch(fn func()) error {
	err := e.store.Batch(fn)
	if !e.store.InBatch() {
		later := e.later
		e.later = nil
		for _, ev := range later {
			e.tell(ev)
		}
		// The next batch's events go in the same array, unless one was told in it.
		if e.later == nil {
			clear(later)
			e.later = later[:0]
		}
	}
	return err
}

// Adopt takes up the attempts that were running when the last engine on the store's
// state stopped, when the runner can (see Adopter), and returns how many it took up.
// Call it once, before Serve.
func (e *Engine) Adopt() (int, error) {
	e.driving("Adopt")
	ad, ok := e.runner.(Adopter)
	if !ok {
		return 0, nil
	}
	view := e.store.View()
	running := view.Running()
	for _, a := range running {
		st := ad.Adopt(a)
		if j := view.Job(a.Job); j != nil && j.Cancelling {
			// gpuq cancel was stopping it as the last daemon ended: it may not have
			// been told its trainer.
			e.runner.Stop(a)
		}
		// The last daemon died before it recorded the trainer's pid.
		if a.Leader == 0 && st.Leader != 0 {
			c := *a
			c.Leader, c.Log = st.Leader, st.Log
			if err := e.put(state.Change{Attempts: []*state.Attempt{&c}}); err != nil {
				return 0, err
			}
		}
	}
	return len(running), nil
}
