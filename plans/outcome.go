package plans

import (
	"fmt"
	"strconv"
)

// Outcome is how an attempt ended.
type Outcome string

// Attempt outcomes.
const (
	Success   Outcome = "success"
	GPUOOM    Outcome = "gpu-oom"
	HostOOM   Outcome = "host-oom"
	Failed    Outcome = "failed"
	Cancelled Outcome = "cancelled"
	TimedOut  Outcome = "timed-out" // stopped for running past its job's timeout
	Lost      Outcome = "lost"      // gpuq lost track of it (it could not be started, or its supervisor died)
	// StoppedEarly: gpuq stopped it because its point was losing (early_stop).
	StoppedEarly Outcome = "stopped-early"
	// AllocConfRefused: PyTorch before 2.1 refused PYTORCH_CUDA_ALLOC_CONF's
	// expandable_segments, which gpuq sets by default.
	AllocConfRefused Outcome = "alloc-conf-refused"
)

// DefaultAllocConf is what PyTorch's allocator gets (PYTORCH_CUDA_ALLOC_CONF) unless the
// sweep says otherwise: expandable segments avoid most fragmentation OOMs at no cost
// (REFERENCE.md §2), from PyTorch 2.1.
const DefaultAllocConf = "expandable_segments:True"

// OOMFacts is what an out-of-memory message told. Sizes are bytes; 0 where the message
// did not say (or was cut off before saying).
type OOMFacts struct {
	Signature       string       `json:"signature"` // which known text matched
	Device          int          `json:"device"`    // CUDA ordinal in the attempt's mask; -1 unknown
	TriedBytes      int64        `json:"tried_bytes,omitempty"`
	TotalBytes      int64        `json:"total_bytes,omitempty"`
	FreeBytes       int64        `json:"free_bytes,omitempty"`
	ProcessBytes    int64        `json:"process_bytes,omitempty"` // this process, including non-PyTorch memory
	AllocatedBytes  int64        `json:"allocated_bytes,omitempty"`
	ReservedUnusedB int64        `json:"reserved_unallocated_bytes,omitempty"` // fragmentation
	Others          []ProcessUse `json:"others,omitempty"`
	// SelfAmongOthers: no process was "this process" (PyTorch in a container saw host
	// pids), so the trainer is one of Others and which is not known.
	SelfAmongOthers  bool `json:"self_among_others,omitempty"`
	ExitSignalKilled bool `json:"sigkill,omitempty"`
	// Likely: the text is an out-of-memory only if the card was nearly full
	// (CUBLAS_STATUS_NOT_INITIALIZED); the attempt ended Failed unless the engine finds
	// it was.
	Likely bool `json:"likely,omitempty"`
	// Loading: the allocation failed while the process put a model's weights (or a
	// checkpoint) on the card, before any batch ran: what it held and asked for then
	// is what it needs before a batch, which no smaller batch or checkpointing lowers.
	Loading bool `json:"loading,omitempty"`
}

// ProcessUse is another process the message named on the card.
type ProcessUse struct {
	PID   int   `json:"pid"`
	Bytes int64 `json:"bytes"`
}

// OthersBytes is what the other processes named in the message held.
func (f *OOMFacts) OthersBytes() int64 {
	var n int64
	for _, o := range f.Others {
		n += o.Bytes
	}
	return n
}

// ProcessExit is how an attempt's trainer process ended, as its runner saw it: its exit
// status, or the signal that killed it, and the last error line of its output.
type ProcessExit struct {
	Code   int    `json:"code"`             // exit status; -1 when a signal ended it
	Signal string `json:"signal,omitempty"` // the signal that ended it ("SIGKILL"); "" for none
	// Error is the exception line of the last Python traceback in its output, or, with
	// none, its last line that is not blank; "" for a process that exited 0.
	Error string `json:"error,omitempty"`
}

// Status says how it exited, as a sentence ends: "with status 1", "by signal SIGKILL".
func (e *ProcessExit) Status() string {
	if e.Signal != "" {
		return "by signal " + e.Signal
	}
	return fmt.Sprintf("with status %d", e.Code)
}

// Short is its exit in a column: "1", or "SIGKILL".
func (e *ProcessExit) Short() string {
	if e.Signal != "" {
		return e.Signal
	}
	return strconv.Itoa(e.Code)
}
