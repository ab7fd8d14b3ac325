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
	// Cards are the card indices it was given (its CUDA_VISIBLE_DEVICES), and Tier its
	// tier; Written is when its spec.json was written, as its supervisor was started.
	// Cards is nil where spec.json is not there: its supervisor was never started.
	Cards   []int
	Tier    int
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
			l.Cards, l.Tier, l.Written = startedWith(filepath.Join(root, job.Name(), a.Name()))
			out = append(out, l)
		}
	}
	return out, nil
}

// startedWith reads what an attempt's spec.json says of it: the cards and the tier its
// trainer's environment names, and when it was written. Zero where it cannot be read.
func startedWith(dir string) (cards []int, tier int, written time.Time) {
	f, err := os.OpenFile(filepath.Join(dir, specFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, time.Time{}
	}
	defer f.Close()
	var spec Spec
	fi, err := f.Stat()
	if err == nil {
		err = json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&spec)
	}
	if err != nil {
		return nil, 0, time.Time{}
	}
	cards = []int{}
	for _, kv := range spec.Command.Env {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case "CUDA_VISIBLE_DEVICES":
			for _, s := range strings.Split(v, ",") {
				if i, err := strconv.Atoi(s); err == nil {
					cards = append(cards, i)
				}
			}
		case "GPUQ_TIER":
			tier, _ = strconv.Atoi(v)
		}
	}
	return cards, tier, fi.ModTime()
}
