package pack

// What the packer reads (the queue's requests, the cards, each machine's RAM) and what
// it answers (placements and the reservation).

import (
	"math"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Request is a queued job as the packer sees it.
type Request struct {
	Job        string
	Memory     int64 // per card; 0 = unknown, slots alone decide
	GPUsPerJob int   // distinct cards needed at once
	Host       int64 // host RAM; 0 = unknown
	// Quota, when not nil, limits the job to its sweep's cards and plan; the requests
	// of one sweep share it.
	Quota *Quota
	// Duration is how long the job is expected to run: its shape's learned duration,
	// or its timeout, which bounds it; 0 = unknown. A card whose machine has less time
	// left (CardState.Left) does not take it, and it backfills reserved cards only if it
	// ends before they are due.
	Duration time.Duration
	// Waited is how long the job has waited at the head of the queue with cards
	// reserved for it (see DueAfter); 0 for any other job.
	Waited time.Duration
	// Util is the share of a card's compute the job keeps busy alone, as its shape's
	// runs were measured (see Speed), from 0 to 1. UtilUnknown: not measured yet; it
	// counts at Util, a guess, or as compute-bound (1) where Util is 0, so that it
	// shares a card with nothing it could slow. UtilPlanned: not measured yet, of a
	// sweep that writes a gpu_plan: beside its own sweep's jobs it counts as nothing,
	// its plan's word on how many of them share a card; beside another sweep's, of
	// which the plan says nothing, as UtilUnknown (see apart).
	Util        float64
	UtilUnknown bool
	UtilPlanned bool
	// UtilAssumed: Util is the whole card, taken where none of its shape's attempts
	// could be measured (state.Shape.Unmeasured). It packs as measured; the reason it
	// waits says it is not, as gpuq status's all? does.
	UtilAssumed bool
	Exclusive   bool // needs idle cards and keeps them to itself
	// UtilMeasured, where above 0 and below Util, is what NVML measured of its shape:
	// Util is raised above it, its jobs having run slower beside others than it says
	// (state.Shape.PackUtil). It packs at Util; the reason it waits says both. A
	// float32, read as a whole percentage, it shares a word with the flags above: Pack
	// reads a queue of 100,000 requests through for each decision, and what each
	// request takes of memory is what that costs.
	UtilMeasured float32
	// Sweep is the job's sweep, which its card's jobs are told apart by (see apart).
	Sweep string
}

// Quota is what a sweep's own gpus and gpu_plan leave its jobs when several sweeps
// share the machine: on cards[i], Slots[i] is the sweep's plan (0 where it may not
// run) and Free[i] how many more of its jobs may start. Sweeps held to one plan
// together share one Free (see the engine's quotas). Placing a request takes from it,
// so a packer changes the quotas it is given.
type Quota struct {
	Slots []int
	Free  []int
	// OnePerCard: the plan is the default of one job per card, which the sweeps that
	// take it share.
	OnePerCard bool
	// Left, when not nil, is how many more of the sweep's jobs may start on any card:
	// its max_running (Max) less its jobs running. Placing a request takes from it.
	Left *int
	Max  int
	// Placed is how many of the sweep's jobs a Pack has placed: taken from Left, but
	// not running yet, so that why tells what the sweep runs from what starts now.
	Placed int
}

// Hosts is the RAM of each machine the cards are on, by worker ("" for this machine).
// A machine without an entry, as every machine of a nil Hosts, leaves host memory out
// of the decision.
type Hosts map[string]HostState

// HostState is a machine's RAM as the packer sees it, read and reserved like a card's
// memory. A zero Total leaves host memory out of the decision.
type HostState struct {
	Total    int64
	Used     int64 // what the kernel says is in use (total - available)
	Reserved int64 // running attempts' host estimates
	Ours     int64 // what running attempts' processes hold, measured
	Headroom int64 // kept for the system, like a card's headroom
}

// Free is the RAM a new job may count on, as CardState.Free: foreign use is what is in
// use beyond gpuq's own processes.
func (h HostState) Free() int64 {
	if h.Total == 0 {
		return math.MaxInt64
	}
	foreign := max(h.Used-h.Ours, 0)
	return h.Total - max(h.Used, h.Reserved+foreign) - h.Headroom
}

// CardState is one card as the packer sees it.
type CardState struct {
	// Worker is the machine the card is on ("" for this one); a card is known by its
	// worker and index, and a job's cards are all on one machine.
	Worker   string
	Index    int
	Total    int64
	Used     int64 // what NVML says is in use
	Reserved int64 // running attempts' estimates
	Foreign  int64 // memory of processes that are not gpuq's
	// Passing is the part of Foreign that trainers of another gpuq hold (a gpuq run
	// beside the daemon, the daemon's beside gpuq plan): they end, so a job that fits
	// a card only once they have waits for memory, not as too large (see why). Nothing
	// is reserved for it: the other gpuq starts trainers of its own there as its end.
	Passing  int64
	Headroom int64
	Slots    int // the plan's limit
	// Drained: a person drained the card (gpuq drain): it offers no slot, and a job
	// that only it could take waits for it, not as too large.
	Drained   bool
	Running   int  // attempts on the card
	Exclusive bool // a running attempt holds the card alone
	// Ends are the attempts on the card as they are expected to end, soonest first.
	Ends []Release
	// Left is how long the card's machine has left (a worker whose allocation ends);
	// 0: no end.
	Left time.Duration
	// Target is how much of the card's compute the jobs sharing it may ask for
	// together (the sharing target, 1 = all of it); 0: no such limit, memory and slots
	// alone decide how many share it. Util is what they ask for now: gpuq's jobs by
	// their utilizations (a guess for each not measured yet, of which Blind counts and
	// BlindUtil is the part), other processes as NVML measured them: each by its own
	// figure, or, where NVML gives no process on the card one, together by the card's
	// beyond what gpuq's jobs count at (a measured share, never a guess).
	Target    float64
	Util      float64
	Blind     int
	BlindUtil float64
	// Sweep is the sweep whose jobs alone run on the card ("" while none runs), and
	// Mixed says that jobs of several sweeps do (see AddSweep). Planned is what the
	// jobs on it of sweeps with a gpu_plan, not measured yet, count at beside another
	// sweep's jobs, and PlannedJobs how many they are: Util counts them as nothing,
	// their plan's word, which holds beside their own sweep's jobs alone (see apart).
	Sweep       string
	Mixed       bool
	Planned     float64
	PlannedJobs int
	// Others says that a process that is not gpuq's keeps the card busy (another
	// user's trainer, at 5% of it or more by its own figure or the card's): a gpu_plan
	// is no word on it either, so a planned sweep's jobs not measured yet count there
	// as beside another sweep's jobs (see apart).
	Others bool
	// IdleUse is the least NVML read as used on the card with nothing on it (the
	// driver's own: 0.6 GiB of an idle H200); 0: not read. The headroom is kept for
	// it, up to half of itself (see Free).
	IdleUse int64
}

// AddSweep notes that a job of sweep runs on the card (see Sweep).
func (c *CardState) AddSweep(sweep string) {
	switch {
	case c.Sweep == "" && !c.Mixed:
		c.Sweep = sweep
	case c.Sweep != sweep:
		c.Sweep, c.Mixed = "", true
	}
}

// Release is a running attempt on a card as the packer sees it: when it is expected to
// end, and what it frees then.
type Release struct {
	In        time.Duration // from now; Unknown when nothing says
	Memory    int64
	Exclusive bool
	Util      float64 // of the card's compute, as counted in CardState.Util
	Blind     bool    // not measured yet: counted in CardState.Blind
}

// UnknownEnd is an end nothing foretells: no duration learned and no timeout, or a run
// already longer than expected.
const UnknownEnd = time.Duration(math.MaxInt64)

// Free is the memory a new job may count on: what neither NVML nor gpuq's own
// reservations claim, less headroom. Taking the larger of the two guards against both
// races: a trainer that has not allocated yet, and memory NVML still shows after exit.
// What the card has in use with nothing on it (IdleUse) is within the headroom, up to
// half of it, not on top of it: a job whose estimate is within the card's room fits it
// idle where that use is no more than half the headroom, and at least half the
// headroom stays free beside NVML's reading in any case.
func (c *CardState) Free() int64 {
	return c.Total - max(c.Used-c.idleCredit(), c.Reserved+c.Foreign) - c.Headroom
}

// idleCredit is the part of the card's idle use within its headroom.
func (c *CardState) idleCredit() int64 { return min(max(c.IdleUse, 0), c.Headroom/2) }

// Margin is what a job that fits the card has free beside its estimate at least, by
// NVML's reading: the headroom, less the card's idle use within it.
func (c *CardState) Margin() int64 { return c.Headroom - c.idleCredit() }

// room is what the card offers jobs: its capacity less headroom.
func (c *CardState) room() int64 { return c.Total - c.Headroom }

// idleRoom is what the card would offer with none of gpuq's jobs on it: as Free of the
// card idle, its idle use beyond the headroom's share of it counted.
func (c *CardState) idleRoom() int64 {
	return c.room() - c.Foreign - (max(c.IdleUse, 0) - c.idleCredit())
}

// open reports whether the card has a slot for another job.
// ID is the card as people name it ("3", "node7:3").
func (c *CardState) ID() plans.CardID { return plans.CardID{Worker: c.Worker, Index: c.Index} }

func (c *CardState) open() bool { return c.Running < c.Slots && !c.Exclusive }

// Placement starts a job on cards.
type Placement struct {
	Job    string
	Worker string // the machine of its cards
	Cards  []int  // card indices on it
}

// Decision is the packer's answer for one round.
type Decision struct {
	Placements []Placement
	Waiting    Waits // only from Pack
	// Reservation is what is kept for the first job in the queue that waits; nil when
	// no job waits for cards.
	Reservation *Reservation
}

// Queue is the waiting jobs as Place reads them, in order.
type Queue interface {
	// Next returns the next job that asks at most room bytes per card, or false when
	// none is left. Jobs that ask more may be passed over with the others of their
	// group (as Pass passes): room only shrinks as a round places jobs.
	Next(room int64) (Request, bool)
	// Pass passes over the jobs alike to the one Next returned last (same memory,
	// cards, host memory, exclusivity, quota and duration) that come after it: it
	// waits, and they would too, since placements only take room away.
	Pass()
}
