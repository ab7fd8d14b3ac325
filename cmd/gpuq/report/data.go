// Package report renders a sweep as one self-contained HTML page: a Gantt chart of its
// attempts on the cards, each card's memory over time, every job's attempt history, and
// the sweep's figures. The page needs no network to be viewed: its styles, script and
// charts (SVG drawn here) are inline.
package report

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Data is what a report shows: one sweep's jobs, each with every attempt, on the cards
// of the machine that ran them.
type Data struct {
	Sweep string
	// Source says where the figures come from: a run, the daemon, a simulation.
	Source string
	// Now is when the data was read: a running attempt's bar ends there.
	Now time.Time
	// Virtual: the times are a simulation's, counted from its start, not the clock's.
	Virtual bool
	// Cards are the machine's cards, and its workers'. Those the sweep ran on are drawn,
	// and one that ran an attempt is even when missing here, at the size of what was
	// reserved on it.
	Cards []Card
	Jobs  []Job
	// Found is what its trainers reported, ranked; nil when they reported nothing.
	Found *Found
}

// Card is one of the machine's cards (Worker ""), or a worker's.
type Card struct {
	Worker string
	plans.Card
}

// id is the card as gpuq names it: 3, or node7:3.
func (c Card) id() plans.CardID { return plans.CardID{Worker: c.Worker, Index: c.Index} }

// Job is a job and its attempts, in order.
type Job struct {
	ID, Name, State string
	Reason          string // why it failed
	// Declared is its estimate as written for its current tier; Learned what its shape's
	// measured peak says (0: nothing yet).
	Declared, Learned int64
	Attempts          []Attempt
}

// Attempt is one launch of a job.
type Attempt struct {
	N int
	// Worker is the machine it ran on ("": the daemon's own), GPUs its cards there.
	Worker string
	GPUs   []int
	Tier   int
	// Changed names the parameters the tier changed (batch_size=4), "" for none.
	Changed        string
	EffectiveBatch int64 // 0: unknown
	Estimate, Peak int64
	Outcome        plans.Outcome // "" while it runs
	OOM            *plans.OOMFacts
	// Exit is its trainer's exit status or the signal that killed it ("1", "SIGKILL"),
	// Error the last error line of its output; "" where not known.
	Exit, Error    string
	Started, Ended time.Time // Ended is zero while it runs
	Memory         state.Samples
	// Util is what NVML measured it to keep busy of its card (0 to 1); nil: nothing.
	Util *float64
}

// end is when the attempt stopped holding its cards, or now for a running one.
func (a Attempt) end(now time.Time) time.Time {
	if a.Ended.IsZero() {
		if now.Before(a.Started) {
			return a.Started
		}
		return now
	}
	return a.Ended
}

func (a Attempt) oom() bool { return a.Outcome == plans.GPUOOM || a.Outcome == plans.HostOOM }

// Figures are the sweep's numbers at a glance.
type Figures struct {
	Start, End time.Time
	Makespan   time.Duration
	Jobs       int
	// States counts jobs by state, in a fixed order (succeeded, failed, cancelled,
	// running, queued, held).
	States   []Count
	Attempts int
	OOMs     int
	// PerJob counts jobs by how many attempts they took.
	PerJob []Count
	// GPUBusy is the time each card had an attempt on it, added up over the cards;
	// GPUAvailable the time over the makespan of the cards it ran on.
	GPUBusy, GPUAvailable time.Duration
	// AttemptTime is the attempts' time on cards (two on one card count twice);
	// AttemptTimeLost that of attempts that failed, ran out of memory, were cancelled
	// or lost; AttemptTimeStopped that of attempts early stopping stopped, apart: it
	// was spent as the sweep's early_stop meant it (their points were judged, and
	// lost), not wasted.
	AttemptTime, AttemptTimeLost, AttemptTimeStopped time.Duration
	// Reserved and Used are card memory over time, in GiB-hours: what the packer reserved
	// for attempts (their estimates) and what their processes held (their samples).
	ReservedGiBHours, UsedGiBHours float64
}

// Count is a number of jobs of a kind.
type Count struct {
	Label string
	N     int
}

// figures computes the sweep's figures.
func figures(d Data) Figures {
	var f Figures
	f.Jobs = len(d.Jobs)
	states := map[string]int{}
	perJob := map[int]int{}
	busy := map[plans.CardID][]interval{}
	first := true
	for _, j := range d.Jobs {
		states[j.State]++
		perJob[len(j.Attempts)]++
		for _, a := range j.Attempts {
			end := a.end(d.Now)
			if first || a.Started.Before(f.Start) {
				f.Start = a.Started
			}
			if first || end.After(f.End) {
				f.End = end
			}
			first = false
			f.Attempts++
			if a.oom() {
				f.OOMs++
			}
			took := end.Sub(a.Started) * time.Duration(len(a.GPUs))
			f.AttemptTime += took
			switch a.Outcome {
			case plans.Success, "": // "": still running
			case plans.StoppedEarly:
				f.AttemptTimeStopped += took
			default:
				f.AttemptTimeLost += took
			}
			for _, id := range a.cards() {
				busy[id] = append(busy[id], interval{a.Started, end})
			}
			f.ReservedGiBHours += took.Hours() * float64(a.Estimate) / (1 << 30)
			f.UsedGiBHours += held(a, end) * float64(len(a.GPUs))
		}
	}
	f.Makespan = f.End.Sub(f.Start)
	for _, ivs := range busy {
		f.GPUBusy += union(ivs)
	}
	f.GPUAvailable = f.Makespan * time.Duration(len(cards(d)))
	for _, s := range []string{"succeeded", "stopped", "failed", "cancelled", "running", "queued", "held", "blocked"} {
		if states[s] > 0 {
			f.States = append(f.States, Count{s, states[s]})
		}
	}
	ns := make([]int, 0, len(perJob))
	for n := range perJob {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	for _, n := range ns {
		f.PerJob = append(f.PerJob, Count{attemptsLabel(n), perJob[n]})
	}
	return f
}

func attemptsLabel(n int) string {
	switch n {
	case 0:
		return "no attempt"
	case 1:
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

type interval struct{ from, to time.Time }

// union is how long any of the intervals covers.
func union(ivs []interval) time.Duration {
	slices.SortFunc(ivs, func(p, q interval) int { return p.from.Compare(q.from) })
	var sum time.Duration
	var cur interval
	for i, iv := range ivs {
		switch {
		case i == 0:
			cur = iv
		case iv.from.After(cur.to):
			sum += cur.to.Sub(cur.from)
			cur = iv
		case iv.to.After(cur.to):
			cur.to = iv.to
		}
	}
	return sum + cur.to.Sub(cur.from)
}

// held is the GiB-hours an attempt's samples say it held on its fullest card, each
// reading standing until the next, the last until the attempt's end.
func held(a Attempt, end time.Time) float64 {
	var sum float64
	for i, s := range a.Memory {
		until := end.Sub(a.Started)
		if i+1 < len(a.Memory) {
			until = a.Memory[i+1].At
		}
		if until > s.At {
			sum += (until - s.At).Hours() * float64(s.Bytes) / (1 << 30)
		}
	}
	return sum
}

// cards are the cards to draw, the machine's first and then each worker's, by index:
// those an attempt ran on, named and sized as the machine's are, or where none did, the
// machine's. A card the sweep did not use (another sweep's, on the daemon) would only
// be an empty row.
func cards(d Data) []Card {
	used := map[plans.CardID]bool{}
	for _, j := range d.Jobs {
		for _, a := range j.Attempts {
			for _, id := range a.cards() {
				used[id] = true
			}
		}
	}
	if len(used) == 0 {
		return slices.Clone(d.Cards)
	}
	var out []Card
	for _, c := range d.Cards {
		if used[c.id()] {
			out = append(out, c)
			delete(used, c.id())
		}
	}
	for id := range used { // not among the machine's cards: sized by what was reserved
		out = append(out, Card{Worker: id.Worker, Card: plans.Card{Index: id.Index}})
	}
	slices.SortFunc(out, func(a, b Card) int { return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Index, b.Index)) })
	return out
}

// cards are the cards an attempt ran on, as gpuq names them.
func (a *Attempt) cards() []plans.CardID {
	out := make([]plans.CardID, len(a.GPUs))
	for i, g := range a.GPUs {
		out[i] = plans.CardID{Worker: a.Worker, Index: g}
	}
	return out
}

// on reports whether the attempt ran on card id.
func (a *Attempt) on(id plans.CardID) bool {
	return a.Worker == id.Worker && slices.Contains(a.GPUs, id.Index)
}
