package daemon

// dcgm-exporter's job mapping (its DCGM_HPC_JOB_MAPPING_DIR): a file per GPU, named by
// its index, holding the ids of the jobs on it, one a line; dcgm-exporter then labels
// that GPU's metrics hpc_job="<id>", so that existing DCGM dashboards show gpuq's jobs.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/scheduler/state"
)

// jobMap keeps a mapping directory true to the running attempts.
type jobMap struct {
	dir   string
	cards []int
	// written is each card's file as last written; "" for no file.
	written map[int]string
}

func newJobMap(dir string, cards []int) (*jobMap, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dcgm job map %s: %w", dir, err)
	}
	m := &jobMap{dir: dir, cards: cards, written: map[int]string{}}
	for _, c := range cards {
		// Unknown: whatever a file says, the first update writes or removes it.
		m.written[c] = "\x00"
	}
	return m, nil
}

// update writes the file of each card whose jobs changed. A card without a job has no
// file: dcgm-exporter drops the metrics of a card whose file names none.
func (m *jobMap) update(view state.View) error {
	on := map[int][]string{}
	for _, a := range view.Running() {
		if a.Worker != "" {
			continue // not a card of this machine
		}
		for _, g := range a.GPUs {
			on[g] = append(on[g], a.Job)
		}
	}
	var errs []string
	for _, c := range m.cards {
		jobs := on[c]
		slices.Sort(jobs)
		text := ""
		if len(jobs) > 0 {
			text = strings.Join(jobs, "\n") + "\n"
		}
		if text == m.written[c] {
			continue
		}
		if err := m.write(c, text); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		m.written[c] = text
	}
	if len(errs) > 0 {
		return fmt.Errorf("dcgm job map: %s", strings.Join(errs, "; "))
	}
	return nil
}

// write replaces a card's file whole (a temporary file renamed over it, which
// dcgm-exporter skips: its name is no card index), or removes it for "".
func (m *jobMap) write(card int, text string) error {
	path := filepath.Join(m.dir, strconv.Itoa(card))
	if text == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	tmp, err := os.CreateTemp(m.dir, ".gpuq-"+strconv.Itoa(card)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
