package alloc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeSlurm is testdata/fakeslurm's sbatch, squeue and scancel on the PATH, with their
// jobs in a directory of the test's: gpuq drives them as it drives Slurm's own.
type fakeSlurm struct {
	t   *testing.T
	dir string
}

func newFakeSlurm(t *testing.T) *fakeSlurm {
	t.Helper()
	bin, err := filepath.Abs("testdata/fakeslurm")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSlurm{t: t, dir: t.TempDir()}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_SLURM", f.dir)
	return f
}

// set moves a job to a Slurm state, as Slurm would.
func (f *fakeSlurm) set(id, state, nodes string, start, end time.Time) {
	f.write(id+".job", fmt.Sprintf("%s|None|%s|%s|%s\n", state, nodes, unix(start), unix(end)))
}

func unix(t time.Time) string {
	if t.IsZero() {
		return "N/A"
	}
	return strconv.FormatInt(t.Unix(), 10)
}

// forget has Slurm forget a job, as it does MinJobAge after its end.
func (f *fakeSlurm) forget(id string) { os.Remove(filepath.Join(f.dir, id+".job")) }

// refuse makes sbatch fail with msg on its standard error; "" lets it take jobs again.
func (f *fakeSlurm) refuse(msg string) {
	if msg == "" {
		os.Remove(filepath.Join(f.dir, "refuse"))
		return
	}
	f.write("refuse", msg+"\n")
}

func (f *fakeSlurm) state(id string) string {
	data, _ := os.ReadFile(filepath.Join(f.dir, id+".job"))
	state, _, _ := strings.Cut(string(data), "|")
	return state
}

// submitted returns the scripts sbatch took since the last call, in order.
func (f *fakeSlurm) submitted() []string {
	paths, _ := filepath.Glob(filepath.Join(f.dir, "*.sh"))
	sort.Strings(paths)
	var out []string
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		out = append(out, string(data))
		if err := os.Rename(p, p+".seen"); err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}

// called counts the commands run that begin with prefix ("sbatch --test-only").
func (f *fakeSlurm) called(prefix string) int {
	data, _ := os.ReadFile(filepath.Join(f.dir, "calls"))
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeSlurm) write(name, data string) {
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}
