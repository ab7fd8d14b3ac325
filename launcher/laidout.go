package launcher

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Laid is an attempt as its directory shows it, to a daemon whose state lost its
// record of it.
type Laid struct {
	Job string
	N   int
	// Cards are the card indices it was given (its CUDA_VISIBLE_DEVICES), Tier its
	// tier and Argv what its trainer runs; Written is when its spec.json was written,
	// as its supervisor was started. Cards and Argv are nil where spec.json is not
	// there: its supervisor was never started.
	Cards   []int
	Tier    int
	Argv    []string
	Written time.Time
}

// LaidOut lists the attempts laid out under root (see AttemptDir), in no order. A
// missing root holds none.
func LaidOut(root string) ([]Laid, error) {
	jobs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Laid
	for _, job := range jobs {
		if !job.IsDir() {
			continue
		}
		attempts, err := os.ReadDir(filepath.Join(root, job.Name()))
		if err != nil {
			return nil, err
		}
		for _, a := range attempts {
			leaf, ok := strings.CutPrefix(a.Name(), "attempt-")
			n, err := strconv.Atoi(leaf)
			if !a.IsDir() || !ok || err != nil || n < 1 {
				continue
			}
			l := Laid{Job: job.Name(), N: n}
			l.startedWith(filepath.Join(root, job.Name(), a.Name()))
			out = append(out, l)
		}
	}
	return out, nil
}

// startedWith reads what an attempt's spec.json says of it: the cards and the tier its
// trainer's environment names, its argv, and when it was written. Left zero where it
// cannot be read.
func (l *Laid) startedWith(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, specFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	var spec Spec
	fi, err := f.Stat()
	if err == nil {
		err = json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&spec)
	}
	if err != nil {
		return
	}
	l.Cards, l.Argv, l.Written = []int{}, spec.Command.Argv, fi.ModTime()
	for _, kv := range spec.Command.Env {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case "CUDA_VISIBLE_DEVICES":
			for _, s := range strings.Split(v, ",") {
				if i, err := strconv.Atoi(s); err == nil {
					l.Cards = append(l.Cards, i)
				}
			}
		case "GPUQ_TIER":
			l.Tier, _ = strconv.Atoi(v)
		}
	}
}
