package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/state"
)

// NoCards, as the daemon's --gpus, gives it no cards of its own: it runs jobs on its
// workers alone (a cluster's login node).
const NoCards = "none"

// machine is the daemon's cards and their settings.
type machine struct {
	inv      *nvidia.Inventory // nil with NoCards
	spec     plans.GPUSpec
	cards    []gpu.Card
	slots    []int
	headroom plans.Headroom
	// utilTarget is the sharing target of every card (see scheduler.Config.UtilTarget):
	// a card keeps one, as it keeps one headroom.
	utilTarget float64
	// recalled says which settings came from the daemon's last machine.
	recalled []string
	// given is the machine's settings as given, each with where it came from.
	given plans.Overrides
}

// openMachine opens the cards the daemon schedules on, with the machine's plan,
// headroom and sharing target: the daemon's own settings, never a sweep's. A setting not given is the one
// the last daemon on the state directory ran with (see machineFile), so that a daemon
// started again without them schedules on the machine its sweeps were admitted on.
func openMachine(cfg Config) (*machine, error) {
	ov, recalled, err := recall(cfg.StateDir, cfg.Machine)
	if err != nil {
		return nil, err
	}
	m := &machine{headroom: plans.DefaultHeadroom, recalled: recalled, given: ov}
	if ov.Headroom.Value != "" {
		if m.headroom, err = plans.ParseHeadroom(ov.Headroom.Value); err != nil {
			return nil, badSetting(ov.Headroom, err)
		}
	}
	if ov.UtilTarget.Value != "" {
		if m.utilTarget, err = plans.ParseUtilTarget(ov.UtilTarget.Value); err != nil {
			return nil, badSetting(ov.UtilTarget, err)
		}
	}
	if ov.GPUs.Value == NoCards {
		// Its workers have the cards.
		if cfg.Listen == "" {
			return nil, badSetting(ov.GPUs, errors.New("a daemon with no cards of its own runs jobs on its workers: give it --listen ADDR for them"))
		}
		return m, nil
	}
	if m.spec, err = plans.ParseGPUs(ov.GPUs.Value); err != nil {
		return nil, badSetting(ov.GPUs, err)
	}
	plan := plans.GPUPlan{plans.NoSlotLimit}
	if ov.Plan.Value != "" {
		if plan, err = plans.ParsePlan(ov.Plan.Value); err != nil {
			return nil, badSetting(ov.Plan, err)
		}
	}
	opt := cfg.Inventory
	opt.Source = ov.GPUs.Source
	if m.inv, err = nvidia.Open(m.spec, opt); err != nil {
		return nil, err
	}
	if m.cards, err = m.inv.Read(); err != nil {
		m.inv.Close()
		return nil, err
	}
	if m.slots, err = plan.For(len(m.cards)); err != nil {
		m.inv.Close()
		return nil, badSetting(ov.Plan, err)
	}
	return m, nil
}

// badSetting is a machine setting that cannot be used: bad input, named by its source.
func badSetting(o plans.Override, err error) error {
	return plans.Problems{{File: o.Source, Msg: err.Error()}}
}

// machineFile, in the state directory, holds the machine settings the last daemon was
// given (none of them: it took the defaults), and the cards it read.
const machineFile = api.MachineFile

type machineRecord struct {
	GPUs     string `json:"gpus,omitempty"`
	Plan     string `json:"gpu_plan,omitempty"`
	Headroom string `json:"headroom,omitempty"`
	// UtilTarget is absent from the records of daemons before the sharing target.
	UtilTarget string `json:"util_target,omitempty"`
	// Listen is the address it listened at for workers, as given (the port it had,
	// where it asked for any), and WorkerGrace how long it waited for one away (see
	// recallNet); absent where it listened nowhere, and from the records of daemons
	// before they were kept.
	Listen      string `json:"listen,omitempty"`
	WorkerGrace string `json:"worker_grace,omitempty"`
	// Cards are the cards it read as it started: what a report drawn while no daemon
	// runs sizes each card by (see api.LastCards). Not recalled.
	Cards []api.GPUInfo `json:"cards,omitempty"`
}

// lastMachine is what the last daemon on dir recorded of its machine (see remember),
// and where; the zero record where none did.
func lastMachine(dir string) (machineRecord, string, error) {
	path := filepath.Join(dir, machineFile)
	data, err := os.ReadFile(path)
	var rec machineRecord
	if errors.Is(err, os.ErrNotExist) {
		return rec, path, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		return rec, path, fmt.Errorf("the last daemon's machine: %w; remove %s to start from the defaults", err, path)
	}
	return rec, path, nil
}

// recallNet fills cfg's listen address, where not given, and with it the worker
// grace, where not given either (0), with the last daemon's: its workers link again to
// the address it listened at, and keep their trainers, where a daemon started again
// without it (as the systemd unit starts it, or gpuq daemon -d) would let their leases
// run out. --listen off listens nowhere. It names what it recalled.
func recallNet(cfg Config) (Config, []string, error) {
	if cfg.Listen == ListenOff {
		cfg.Listen = ""
		return cfg, nil, nil
	}
	if cfg.Listen != "" {
		return cfg, nil, nil
	}
	rec, _, err := lastMachine(cfg.StateDir)
	if err != nil || rec.Listen == "" {
		return cfg, nil, err
	}
	cfg.Listen = rec.Listen
	recalled := []string{"listen " + rec.Listen}
	if grace, err := time.ParseDuration(rec.WorkerGrace); err == nil && cfg.WorkerGrace == 0 {
		cfg.WorkerGrace = grace
		if grace != DefaultWorkerGrace {
			recalled = append(recalled, "worker_grace "+rec.WorkerGrace)
		}
	}
	return cfg, recalled, nil
}

// ListenOff, given as --listen, listens nowhere, where the last daemon did.
const ListenOff = "off"

// recall fills the settings not given with those of the last daemon, and names them.
func recall(dir string, ov plans.Overrides) (plans.Overrides, []string, error) {
	rec, path, err := lastMachine(dir)
	if err != nil {
		return ov, nil, err
	}
	var recalled []string
	for _, f := range []struct {
		key  string
		from string
		to   *plans.Override
	}{{"gpus", rec.GPUs, &ov.GPUs}, {"gpu_plan", rec.Plan, &ov.Plan}, {"headroom", rec.Headroom, &ov.Headroom}, {"util_target", rec.UtilTarget, &ov.UtilTarget}} {
		if f.to.Value == "" && f.from != "" {
			*f.to = plans.Override{Value: f.from, Source: fmt.Sprintf("%s: %s (the last daemon's)", path, f.key)}
			recalled = append(recalled, f.key+" "+f.from)
		}
	}
	return ov, recalled, nil
}

// remember records, once the daemon has started (a start that failed, on an address
// taken, keeps nothing of its settings), the machine settings it runs with for the
// next (recall) and the cards it read; and, where it listens for workers at bound
// (given, as --listen), the address for the next daemon (see recallNet), with the
// grace: the port it was given, or the one it had where it asked for any (port 0), to
// which its workers link. Where it listens nowhere (bound nil) no address is kept.
func remember(dir string, m *machine, given string, bound net.Addr, grace time.Duration) error {
	ov := m.given
	rec := machineRecord{GPUs: ov.GPUs.Value, Plan: ov.Plan.Value, Headroom: ov.Headroom.Value, UtilTarget: ov.UtilTarget.Value,
		Cards: api.GPUsOf(m.cards)}
	if bound != nil {
		host, port, err := net.SplitHostPort(given)
		if _, boundPort, berr := net.SplitHostPort(bound.String()); err == nil && berr == nil && port == "0" {
			given = net.JoinHostPort(host, boundPort)
		}
		rec.Listen, rec.WorkerGrace = given, grace.String()
	}
	if err := launcher.WriteJSON(filepath.Join(dir, machineFile), rec); err != nil {
		return fmt.Errorf("record the machine: %w", err)
	}
	return nil
}

// simulated names the simulated machine; "" on real cards, or none.
func (m *machine) simulated() string {
	if m.inv == nil {
		return ""
	}
	return m.inv.Simulated()
}

// name names the machine as gpuq --gpus would.
func (m *machine) name() string {
	if m.inv == nil {
		return "no cards of its own"
	}
	if sim := m.inv.Simulated(); sim != "" {
		return sim // a machine without a driver, too
	}
	return specName(m.spec)
}

// cardsText names the machine and its cards with their slots, as the daemon's start
// line says them; a daemon with no cards of its own (NoCards) has none to list after
// its name.
func (m *machine) cardsText() string {
	if len(m.cards) == 0 {
		return m.name()
	}
	return m.name() + ": " + gpu.CardsText(m.cards, m.slots)
}

// specName names the cards a --gpus names.
func specName(spec plans.GPUSpec) string {
	switch {
	case spec.IsSimulated():
		return spec.String()
	case spec.Indices == nil:
		return "every card"
	}
	return "GPUs " + spec.String()
}

// String names the machine and its cards.
func (m *machine) String() string {
	idx := make([]string, len(m.cards))
	for i, c := range m.cards {
		idx[i] = strconv.Itoa(c.Index)
	}
	return fmt.Sprintf("%s (GPUs %s)", m.name(), strings.Join(idx, ","))
}

// serves reports whether a sweep's own gpus name this machine: the same simulated
// machine, or cards it has. Its error names both machines and how to have the daemon
// serve the sweep: for cards a daemon given fewer than the machine's lacks, restarted
// with its cards and the sweep's together, so that no sweep it serves now loses its.
func (m *machine) serves(sw *plans.Sweep, dir string) error {
	ok := true
	switch {
	case sw.GPUs.IsSimulated():
		ok = m.inv.Simulated() == sw.GPUs.String()
	case sw.GPUs.Indices != nil:
		for _, idx := range sw.GPUs.Indices {
			ok = ok && slices.ContainsFunc(m.cards, func(c gpu.Card) bool { return c.Index == idx })
		}
	}
	if ok {
		return nil
	}
	e := &plans.FieldError{File: sw.File, Field: "gpus"}
	if src := sw.Overrides.GPUs.Source; src != "" {
		e = &plans.FieldError{File: src}
	}
	switch {
	case sw.GPUs.IsSimulated() || m.spec.IsSimulated():
		e.Msg = fmt.Sprintf("the sweep is for %s, but the daemon on %s schedules on %s. To run it on its own cards, "+
			"restart the daemon there: gpuq daemon --stop (its trainers keep running), then gpuq submit starts one on %s "+
			"(or run gpuq daemon -d --gpus %s yourself); or name cards the daemon has with gpuq submit --gpus",
			specName(sw.GPUs), dir, m, specName(sw.GPUs), sw.GPUs)
	case m.spec.Indices == nil:
		e.Msg = fmt.Sprintf("names GPUs %s, but the daemon on %s schedules on every card this machine has (%s): "+
			"name cards it has", sw.GPUs, dir, m)
	default:
		e.Msg = fmt.Sprintf("the sweep is for GPUs %s, but the daemon on %s was given GPUs %s (%s). A daemon owns the "+
			"cards it is given and each sweep's gpus choose among them: restart it with every card its sweeps use, "+
			"gpuq daemon --stop (its trainers keep running), then gpuq daemon -d --gpus %s (or --gpus all); or name cards it "+
			"has with gpuq submit --gpus", sw.GPUs, dir, m.spec, m.given.GPUs.Source, m.union(sw.GPUs.Indices))
	}
	return plans.Problems{e}
}

// union is the machine's card indices and more, in order, as --gpus takes them.
func (m *machine) union(more []int) string {
	var all []int
	for _, c := range m.cards {
		all = append(all, c.Index)
	}
	for _, idx := range more {
		if !slices.Contains(all, idx) {
			all = append(all, idx)
		}
	}
	slices.Sort(all)
	parts := make([]string, len(all))
	for i, idx := range all {
		parts[i] = strconv.Itoa(idx)
	}
	return strings.Join(parts, ",")
}

// missing names the cards of a sweep's limit that the machine lacks, for a warning.
func (m *machine) missing(l state.Limit) []int {
	var out []int
	for idx := range l {
		if !slices.ContainsFunc(m.cards, func(c gpu.Card) bool { return c.Index == idx }) {
			out = append(out, idx)
		}
	}
	slices.Sort(out)
	return out
}

// plan is the machine's plan on its cards, for what a sweep is told of it.
func (m *machine) plan() scheduler.MachinePlan {
	return scheduler.MachinePlan{Cards: m.cards, Slots: m.slots, Plan: m.given.Plan.Value, From: m.given.Plan.Source}
}
