// Package gpu holds what gpuq knows of a card and the processes on it, as the
// inventory reads them (package gpu/nvidia, through NVML) and as workers report them.
// It links no NVML: the packer, the state and the clients that print cards take these
// types without cgo.
package gpu

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Card is one card at one moment.
type Card struct {
	// Worker is the machine the card is on: "" for this one, or the name of a gpuq
	// worker (another node) that reported it. A card is known by its worker and index.
	Worker    string `json:",omitempty"`
	Index     int    // as nvidia-smi numbers it (PCI bus order), on its machine
	UUID      string
	Name      string
	BusID     string
	Total     int64
	Used      int64 // as NVML reports it, driver reservations included
	Processes []Process
	// Fault says why the card is out of service: NVML could not read it. Its identity
	// and Total are from its last good reading, if any; it takes no new job, and its
	// running attempts are left to end.
	Fault string
	// Utilization is the share of the last sample period a kernel ran (percent), and
	// Temperature the core's (°C); NoReading where NVML gives none.
	Utilization, Temperature int
	// Busy is the card's utilization (percent) averaged over BusyOver, the time up to
	// the reading in which NVML sampled it while the card listed the processes it lists
	// now (at most half a minute: nvmlDeviceGetSamples). BusyOver is 0 where there are
	// no such samples, and from a worker of an older build, which sends neither.
	Busy     int           `json:",omitempty"`
	BusyOver time.Duration `json:",omitempty"`
}

// NoReading is a figure NVML did not give.
const NoReading = -1

// Process is one compute process on a card, an MPS client included.
type Process struct {
	PID  int
	Used int64 // bytes; Unknown where NVML cannot tell (MIG, some containers)
	// Hidden: NVML lists it, but this PID namespace has no such process (gpuq runs in
	// a container and the driver reports host PIDs), so its owner cannot be told.
	Hidden bool `json:",omitempty"`
	// Attempt is the attempt the process belongs to, where the machine that read the
	// card has told it already (a worker knows its own trainers); "" otherwise.
	Attempt string `json:",omitempty"`
	// Util is the share of the card's compute the process kept busy over NVML's last
	// sample period (per-process SM utilization), in percent; NoReading where NVML
	// gives none (drivers without per-process accounting, no sample yet).
	Util int `json:",omitempty"`
}

// Unknown is a process's memory use when NVML cannot tell.
const Unknown = -1

// ID is the card's name: its machine and index.
func (c Card) ID() plans.CardID { return plans.CardID{Worker: c.Worker, Index: c.Index} }

// CardsText names cards with their sizes and slots, for a log.
func CardsText(cards []Card, slots []int) string {
	parts := make([]string, len(cards))
	for i, c := range cards {
		limit := "no slot limit"
		if slots[i] != plans.NoSlotLimit {
			limit = plans.Count(slots[i], "slot")
		}
		parts[i] = fmt.Sprintf("GPU %d %s (%s)", c.Index, plans.FormatSize(c.Total), limit)
	}
	return strings.Join(parts, ", ")
}
