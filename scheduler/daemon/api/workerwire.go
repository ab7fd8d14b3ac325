package api

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// A gpuq worker's link to its daemon is one stream (GET /v1/worker with Upgrade) of
// JSON messages, one a line, each way. The worker opens it, and opens it again whenever
// it breaks: the daemon never connects to a node, so a worker behind a cluster's
// firewall or NAT works as well. The worker says Hello; the daemon answers Welcome, then
// starts, stops and streams attempts, and answers the worker's beats so that its lease
// holds (see the daemon's fence.go); the worker reports its cards and RAM when a poll
// reads them otherwise than it last reported, and how each attempt ended.

// WorkerProtocol is the version of the link's messages, both ways: a daemon links only
// a worker that speaks its own, and a worker only a daemon that does, since one of
// another would misread what it is sent.
// It goes up where a message changes so that a gpuq of the other protocol would do
// other than it is asked (a field renamed, or one that must be acted on added), not
// for a field that either may do without.
const WorkerProtocol = 1

// ProtocolOf is the protocol a worker's Hello says it speaks: the first where it says
// none, as a gpuq from before Hello said it.
func (h Hello) ProtocolOf() int { return max(h.Protocol, 1) }

// ProtocolOf is the protocol a daemon's Welcome says it speaks: the first where it
// says none, as a gpuq from before Welcome said it.
func (w Welcome) ProtocolOf() int { return max(w.Protocol, 1) }

// OtherBuilds reports whether two gpuq version texts (as gpuq --version says them) name
// other builds of gpuq. Where both name a commit (in "(commit ...)", in a Go
// pseudo-version, or in git describe's words), they are other builds where the commits
// differ; else, where both name a release, where the releases differ. A build that
// names neither ("dev", as go test and go run build it) is not told apart from any,
// nor a release from a commit, nor two builds of one commit by their Go or by changes
// not committed (+dirty): Go 1.24 and later stamp every build of a commit with its
// pseudo-version, and a dirty one with +dirty, which must not make it another build.
func OtherBuilds(a, b string) bool {
	ra, ca := versionParts(a)
	rb, cb := versionParts(b)
	if ca != "" && cb != "" {
		n := min(len(ca), len(cb))
		return ca[:n] != cb[:n]
	}
	return ra != "" && rb != "" && ra != rb
}

// Compiled when first used, as a worker links: not in every gpuq's start.
var (
	// pseudoVersion is a Go pseudo-version, whose last part is its commit's first 12
	// hex digits: v0.0.0-20260301090000-0123456789ab, v0.4.1-0.20260301090000-0123456789ab.
	pseudoVersion = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[^+]*\.)?[0-9]{14}-([0-9a-f]{12})$`)
	})
	// described is git describe --tags --always's name of a commit past a tag
	// (v0.4.0-3-g0123456), or of one with no tag before it (0123456).
	described = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:.+-[0-9]+-g)?([0-9a-f]{7,40})$`) })
)

// versionParts is a gpuq version text's release, where it names one ("v0.4.0"; "" for
// "dev", a pseudo-version, or git describe's name of a commit past a tag), and the
// commit it names, shortened to 12 hex digits ("" where it names none): "dev (commit
// 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.1", "v0.0.0-20260301090000-
// 0123456789ab+dirty (...)", "v0.4.0-3-g0123456-dirty". A release's changes not
// committed (+dirty, or git describe's -dirty) are no part of it.
func versionParts(v string) (release, commit string) {
	release, rest, _ := strings.Cut(v, " (")
	release, _, _ = strings.Cut(release, ",")
	release, _, _ = strings.Cut(strings.TrimSpace(release), "+")
	release = strings.TrimSuffix(release, "-dirty")
	if _, after, ok := strings.Cut(rest, "commit "); ok {
		if f := strings.FieldsFunc(after, func(r rune) bool { return r == ',' || r == ')' || r == ' ' }); len(f) > 0 {
			commit = strings.ToLower(f[0])
		}
	}
	var named string
	if m := pseudoVersion().FindStringSubmatch(release); m != nil {
		named = m[1]
	} else if m := described().FindStringSubmatch(release); m != nil {
		named = m[1]
	}
	if named != "" || release == "dev" {
		release = ""
	}
	commit = cmp.Or(commit, named)
	return release, commit[:min(len(commit), 12)]
}

// WorkerMessage is one message from a worker.
type WorkerMessage struct {
	Hello *Hello          `json:"hello,omitempty"`
	State *WorkerState    `json:"state,omitempty"`
	Exit  *scheduler.Exit `json:"exit,omitempty"`
	// Leaving: the worker wants to stop (it has been idle past its --idle-timeout);
	// the daemon starts nothing more there and answers Drain.
	Leaving bool `json:"leaving,omitempty"`
	// ExitMetrics are the last readings of the attempt Exit ends, read as it ended.
	ExitMetrics []plans.Reading `json:"exit_metrics,omitempty"`
	// ExitAgo is how long before this message the attempt Exit ends ended, by the
	// worker's clock: an end told late (the worker was away) is dated so by the
	// daemon's, whatever the two clocks read.
	ExitAgo time.Duration `json:"exit_ago,omitempty"`
	// Beat numbers a beat (from 1): the daemon answers it with Ack, which renews the
	// worker's lease from when the worker sent it.
	Beat uint64 `json:"beat,omitempty"`
}

// Hello is what a worker says of itself when it connects.
type Hello struct {
	// Name is the worker's, its cards' first name (node7:3): the same across its
	// reconnections and the daemon's restarts.
	Name string `json:"name"`
	// Instance is the worker's directory's own id: a worker started again on its node
	// keeps it, one of the same name on another node has another.
	Instance string `json:"instance,omitempty"`
	// Version is the worker's gpuq, as gpuq --version says it.
	Version string `json:"version"`
	// Protocol is the version of the link's messages the worker speaks (see
	// WorkerProtocol); 0, from a gpuq that said none, is the first.
	Protocol int `json:"protocol,omitempty"`
	// Dir is where its attempts live on its node (their logs, for people).
	Dir   string `json:"dir"`
	Cores int    `json:"cores"`
	// Allocation is the Slurm job the worker runs in (SLURM_JOB_ID), "" outside one: an
	// allocation queue (gpuq alloc) counts its allocations' workers by it.
	Allocation string `json:"allocation,omitempty"`
	// Plan is the most jobs on each of its cards, by index; a card not in it has no
	// slot limit.
	Plan  map[int]int `json:"plan"`
	State WorkerState `json:"state"`
}

// WorkerState is what a worker reads of its node every poll, and sends where that
// differs from what it sent last.
type WorkerState struct {
	// Cards are its cards as NVML reads them, each process named with its attempt
	// where it is one of the worker's.
	Cards []gpu.Card `json:"cards"`
	// HostTotal and HostAvailable are its RAM (0: not known).
	HostTotal     int64 `json:"host_total"`
	HostAvailable int64 `json:"host_available"`
	// AttemptMemory is what each of its attempts' processes hold of its RAM.
	AttemptMemory map[string]int64 `json:"attempt_memory,omitempty"`
	// AttemptMetrics are what each of its attempts' trainers reported since its last
	// state (see scheduler.MetricReader).
	AttemptMetrics map[string][]plans.Reading `json:"attempt_metrics,omitempty"`
	// Ends is when it stops taking jobs (its allocation's end); zero: never.
	Ends time.Time `json:"ends,omitzero"`
}

// DaemonMessage is one message from the daemon to a worker.
type DaemonMessage struct {
	Welcome *Welcome       `json:"welcome,omitempty"`
	Start   *StartRequest  `json:"start,omitempty"`
	Stop    *AttemptRef    `json:"stop,omitempty"`
	Stream  *StreamRequest `json:"stream,omitempty"`
	// Drain: start nothing more; exit once no attempt runs.
	Drain bool `json:"drain,omitempty"`
	// Ack answers the worker's beat of that number.
	Ack uint64 `json:"ack,omitempty"`
	// Error is why the daemon will not have the worker; the link closes after it.
	Error string `json:"error,omitempty"`
}

// Welcome is the daemon's answer to Hello, which it answers as a beat (see Ack).
type Welcome struct {
	// Lease is how long the worker's trainers may run past the sending of a beat the
	// daemon answered; Stop is then their time from SIGTERM to SIGKILL. Beat is how
	// often the worker beats.
	Lease time.Duration `json:"lease"`
	Stop  time.Duration `json:"stop"`
	Beat  time.Duration `json:"beat"`
	// Attempts are the attempts the daemon holds running on the worker: the worker
	// takes each up, reports it ended, or reports it unstarted.
	Attempts []AttemptRef `json:"attempts"`
	// Ask are attempts the daemon gave up for lost with the worker, past its grace,
	// whose jobs have not ended: the worker reports how each ended, if it knows, since
	// a success it holds wins over their requeue.
	Ask []AttemptRef `json:"ask,omitempty"`
	// Protocol is the version of the link's messages the daemon speaks (see
	// WorkerProtocol), and Version its gpuq, as gpuq --version says it: the worker
	// leaves a daemon of another protocol, and warns of one of another build. A daemon
	// from before they were said sends neither (protocol 0, the first; version "").
	Protocol int    `json:"protocol,omitempty"`
	Version  string `json:"version,omitempty"`
}

// AttemptRef names an attempt.
type AttemptRef struct {
	ID  string `json:"id"`
	Job string `json:"job"`
	N   int    `json:"n"`
}

// StartRequest starts an attempt on a worker, on its cards a.GPUs.
type StartRequest struct {
	Attempt *state.Attempt `json:"attempt"`
	// Sweep is the attempt's sweep, as submitted; sent once per sweep and link, when
	// the worker has not had it yet. SweepKey names it either way.
	Sweep    *SweepSource `json:"sweep,omitempty"`
	SweepKey string       `json:"sweep_key"`
	// Env is the sweep's env as the engine runs it now, which replaces the one it was
	// submitted with.
	Env     []plans.EnvVar `json:"env,omitempty"`
	Environ []string       `json:"environ,omitempty"`
	// Sharing is how many trainers share the worker once this one runs (threads: auto).
	Sharing int `json:"sharing"`
}

// SweepSource is a sweep as it was submitted: the worker expands it as a daemon
// replaying its journal does (plans.DecodeSweepFiles).
type SweepSource struct {
	File      string            `json:"file"`
	Source    string            `json:"source"`
	Overrides plans.Overrides   `json:"overrides"`
	Files     map[string]string `json:"files,omitempty"`
}

// StreamRequest asks for an attempt's log or terminal. A worker answers it by opening
// a stream (GET /v1/worker/stream/{token}) and serving the attempt on it.
type StreamRequest struct {
	Token   string     `json:"token,omitempty"`
	Attempt AttemptRef `json:"attempt"`
	Kind    string     `json:"kind"`           // "log", "attach", "attach-ro" or "size"
	Tail    int        `json:"tail,omitempty"` // log: only the last lines
	Follow  bool       `json:"follow,omitempty"`
	// size: the rows and columns of the terminal an attach client shows it on.
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
}

// Stream kinds.
const (
	StreamLog            = "log"
	StreamAttach         = "attach"
	StreamAttachReadOnly = "attach-ro"
	StreamSize           = "size" // sets the terminal's size, and ends
)

// WorkerInfo is a worker as the API shows it.
type WorkerInfo struct {
	Name      string    `json:"name"`
	Connected bool      `json:"connected"`
	Heard     time.Time `json:"heard"` // its last message
	// Unheard: this daemon has not heard from it (it took up its attempts from the
	// last daemon's state); Heard is when the daemon started.
	Unheard bool   `json:"unheard,omitempty"`
	Version string `json:"version"`
	// OtherBuild: Version names another build of gpuq than the daemon's (see
	// OtherBuilds), which speaks the link's protocol all the same.
	OtherBuild bool      `json:"other_build,omitempty"`
	Cores      int       `json:"cores"`
	GPUs       []GPUInfo `json:"gpus"`
	Running    int       `json:"running"` // attempts held running there
	Draining   bool      `json:"draining"`
	Ends       time.Time `json:"ends,omitzero"`
}

// WorkerAway is a worker whose link is lost, within its grace: its attempts are held
// running until Until, then given up for lost and their jobs queued again, unless it is
// back by then. Since is when it was last heard from; or, Unheard, a worker not heard
// from since the daemon started (its attempts taken up from the last one's state),
// when the daemon started and began to wait for it.
type WorkerAway struct {
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	Unheard bool      `json:"unheard,omitempty"`
}

// SinceText says since when the worker was not heard from: "since 15:04:05", or
// "since the daemon started at 15:04:05" where this daemon never heard from it.
func (a WorkerAway) SinceText() string {
	if a.Unheard {
		return "since the daemon started at " + a.Since.Format("15:04:05")
	}
	return "since " + a.Since.Format("15:04:05")
}

// Text says what becomes of an attempt on worker, away, at now.
func (a WorkerAway) Text(worker string, now time.Time) string {
	s := fmt.Sprintf("worker %s is away, not heard from %s", worker, a.SinceText())
	if left := a.Until.Sub(now); left > 0 {
		return s + fmt.Sprintf("; unless it is back within %s, its attempt is given up for lost and the job runs again", left.Round(time.Second))
	}
	return s + "; its attempt is being given up for lost, and the job runs again"
}

// BacklogResponse is the queued work that no connected card can start now (see
// scheduler.Engine.Backlog).
type BacklogResponse struct {
	Jobs    int            `json:"jobs"`
	Reasons map[string]int `json:"reasons"`
	// GPUsPerJob is the most cards one of those jobs needs on one machine.
	GPUsPerJob int `json:"gpus_per_job"`
}

// workerName is what a worker may be called: a host name, without the colon that
// separates a worker from a card index (node7:3).
var workerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })

// ValidWorkerName says why a worker may not be called name; nil when it may.
func ValidWorkerName(name string) error {
	if !workerName().MatchString(name) || len(name) > 128 {
		return fmt.Errorf("%q cannot name a worker: letters, digits, '.', '_' and '-' (a host name), beginning with a letter or a digit, at most 128", name)
	}
	return nil
}
