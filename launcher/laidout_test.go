package launcher

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestLaidOutFindsEveryAttempt: the attempts under a root, with the cards, the tier and
// the argv their spec.json started them with, for a salvage of a state that lost their
// records; what is not an attempt's directory is passed over.
func TestLaidOutFindsEveryAttempt(t *testing.T) {
	root := t.TempDir()
	write := func(job string, n int, env ...string) {
		t.Helper()
		dir, err := AttemptDir(root, job, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if env != nil {
			argv := []string{"python3", "train.py", "--seed", job}
			if err := WriteJSON(filepath.Join(dir, specFile), Spec{Command: Command{Argv: argv, Env: env}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("s.1", 1, "PATH=/bin", "CUDA_VISIBLE_DEVICES=2,3", "GPUQ_TIER=0")
	write("s.1", 2, "CUDA_VISIBLE_DEVICES=5", "GPUQ_TIER=1")
	write("s.2", 1) // its supervisor never started: no spec.json
	os.MkdirAll(filepath.Join(root, "s.2", "notes"), 0o700)
	os.WriteFile(filepath.Join(root, "stray"), nil, 0o600)
	got, err := LaidOut(root)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Laid) int { return strings.Compare(a.Job, b.Job)*10 + a.N - b.N })
	var cards [][]int
	var tiers []int
	var argvs []string
	for _, l := range got {
		if l.Cards != nil && l.Written.IsZero() {
			t.Errorf("%s/%d: no time written", l.Job, l.N)
		}
		cards, tiers, argvs = append(cards, l.Cards), append(tiers, l.Tier), append(argvs, strings.Join(l.Argv, " "))
	}
	if len(got) != 3 || got[0].Job != "s.1" || got[1].N != 2 || got[2].Job != "s.2" ||
		!reflect.DeepEqual(cards, [][]int{{2, 3}, {5}, nil}) || !reflect.DeepEqual(tiers, []int{0, 1, 0}) ||
		!reflect.DeepEqual(argvs, []string{"python3 train.py --seed s.1", "python3 train.py --seed s.1", ""}) {
		t.Errorf("laid out: %+v", got)
	}
	if none, err := LaidOut(filepath.Join(root, "missing")); none != nil || err != nil {
		t.Errorf("a missing root: %v, %v", none, err)
	}
}
