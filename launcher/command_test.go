package launcher

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestPrepareRefusesWhatLinuxWouldNotStart: an argument or environment variable that
// only the attempt makes longer than Linux passes a program (plans.MaxArgLen) fails
// its preparation, naming the job, the argument or variable, its size and the limit,
// before a supervisor starts: the plan counts gpuq's own values ({job} here) as
// nothing, and knows nothing of the environment the attempt is started in.
func TestPrepareRefusesWhatLinuxWouldNotStart(t *testing.T) {
	blob := strings.Repeat("x", plans.MaxArgLen-1)
	doc := "name: t\ncommand: [echo, \"{blob}{job}\"]\njobs: [{blob: " + blob + "}]\n"
	s, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatalf("the plan refused what only the attempt makes too long: %v", err)
	}
	a := Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: filepath.Join(t.TempDir(), "t.1", "1"), Cards: []plans.Card{{Index: 0}}}
	_, err = Prepare(a, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "job t.1: command[1] is 128.00 KiB with its placeholders filled in, longer than the 128 KiB Linux passes a program in one argument (MAX_ARG_STRLEN)") {
		t.Errorf("an argument of %d bytes: %v", plans.MaxArgLen+2, err)
	}

	s, err = plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte("name: t\ncommand: [echo]\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a.Sweep, a.Params = s, s.Jobs[0].Params
	_, err = Prepare(a, []string{"HUGE=" + strings.Repeat("h", plans.MaxArgLen-len("HUGE=")+1)})
	if err == nil || !strings.HasPrefix(err.Error(), "job t.1: environment variable HUGE is 128.00 KiB, longer than the 128 KiB Linux passes a program in one environment variable") {
		t.Errorf("an environment variable of %d bytes: %v", plans.MaxArgLen+1, err)
	}
	if _, err := Prepare(a, []string{"HUGE=" + strings.Repeat("h", plans.MaxArgLen-len("HUGE="))}); err != nil {
		t.Errorf("an environment variable of %d bytes, the most Linux passes: %v", plans.MaxArgLen, err)
	}
}

// TestStartSaysWhyLinuxRefusedTheCommand: where execve refuses a command as too big
// (E2BIG, "argument list too long"), the start fails saying what was too big and what
// to do: arguments each short enough but more than ARG_MAX together (at most 6 MiB,
// whatever the stack size limit), or one argument too long.
func TestStartSaysWhyLinuxRefusedTheCommand(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true on the PATH")
	}
	many := []string{prog}
	for range 64 {
		many = append(many, strings.Repeat("m", 127<<10))
	}
	for name, c := range map[string]struct {
		argv []string
		want string
	}{
		"together":     {many, "its arguments and environment, 7.94 MiB in all, are more than Linux passes a program (ARG_MAX"},
		"one too long": {[]string{prog, "ok", strings.Repeat("o", plans.MaxArgLen+1)}, "command[2] is 128.00 KiB with its placeholders filled in, longer than the 128 KiB Linux passes a program in one argument"},
	} {
		_, err := Start(Command{Argv: c.argv, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}, filepath.Join(t.TempDir(), "log"), "# header\n", nil)
		if !errors.Is(err, syscall.E2BIG) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want E2BIG and %q", name, err, c.want)
		}
	}
}

// TestWithoutAttempt: the environment of an attempt (it names its directory) loses the
// attempt's own variables, a person's keeps its CUDA_VISIBLE_DEVICES.
func TestWithoutAttempt(t *testing.T) {
	person := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=1"}
	if got := withoutAttempt(person); !slices.Equal(got, person) {
		t.Errorf("a person's environment became %q", got)
	}
	trainer := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=1", "GPUQ_JOB_ID=s.1", attemptDirVar + "=/a", MetricsVar + "=/a/m", "MASTER_PORT=29501", "HOME=/h"}
	if got, want := withoutAttempt(trainer), []string{"PATH=/bin", "HOME=/h"}; !slices.Equal(got, want) {
		t.Errorf("a trainer's environment became %q, want %q", got, want)
	}

	// Every variable Prepare sets of the attempt itself is one withoutAttempt drops: a
	// new one set there and not named in attemptVars would reach a hook. What it sets
	// for any process of the sweep (the defaulted threads and allocator, the cards'
	// order, the simulation's ledger) stays.
	s, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte("name: t\ncommand: [echo]\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a := Attempt{Sweep: s, JobID: "t.1", JobName: "lr=1", N: 1, Params: s.Jobs[0].Params, Dir: filepath.Join(t.TempDir(), "t.1", "1"),
		Cards: []plans.Card{{Index: 0, Total: 1 << 30}}, Ledger: filepath.Join(t.TempDir(), "ledger"), MasterPort: 29600}
	c, err := Prepare(a, []string{"PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	kept := append(slices.Clone(DefaultedVars), "CUDA_DEVICE_ORDER", "GPUQ_SIM_LEDGER", "PATH")
	for _, kv := range withoutAttempt(c.Env) {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(kept, name) {
			t.Errorf("an attempt's %s reaches what it starts: name it in attemptVars", name)
		}
	}
}
