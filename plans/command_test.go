package plans

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnArgumentLongerThanLinuxPassesIsRefused: a job whose command or environment,
// its placeholders filled in, holds an argument or variable longer than Linux passes a
// program (MAX_ARG_STRLEN, 128 KiB with its NUL) is refused with the sweep, naming the
// job, the field and the limit: its attempt could only fail to start, with execve's
// "argument list too long". A mapping placeholder such as {training} counts as the
// section the rendered config holds, the base's keys merged in, however short the
// parameter itself. (Such a sweep was taken, and each attempt lost as it started.)
func TestAnArgumentLongerThanLinuxPassesIsRefused(t *testing.T) {
	limit := fmt.Sprintf("longer than the %d KiB Linux passes a program in one ", (MaxArgLen+1)>>10)
	problems := func(err error) map[string]string {
		var probs Problems
		if !errors.As(err, &probs) {
			t.Fatalf("%v: want the sweep's problems", err)
		}
		out := map[string]string{}
		for _, p := range probs {
			out[p.Field+" "+p.Job] = p.Msg
		}
		return out
	}

	// A string parameter: one byte under the limit runs, one byte more does not.
	doc := fmt.Sprintf("name: s\ncommand: [echo, \"{blob}\"]\njobs: [{blob: %s}, {blob: %s}]\n",
		strings.Repeat("a", MaxArgLen), strings.Repeat("b", MaxArgLen+1))
	_, err := DecodeSweep("/sweeps/s.yaml", []byte(doc), Overrides{})
	got := problems(err)
	if len(got) != 1 || !strings.HasPrefix(got["command[1] s.2"], "with its placeholders filled in it is "+limit+"argument (MAX_ARG_STRLEN)") ||
		!strings.Contains(got["command[1] s.2"], `--config "{config}"`) {
		t.Errorf("an argument of %d bytes and one of %d: %q; want s.2's refused", MaxArgLen, MaxArgLen+1, got)
	}

	// An environment variable counts its NAME=.
	doc = fmt.Sprintf("name: e\ncommand: [echo]\nenv: {NOTES: \"{blob}\"}\njobs: [{blob: %s}]\n", strings.Repeat("c", MaxArgLen-len("NOTES=")+1))
	_, err = DecodeSweep("/sweeps/e.yaml", []byte(doc), Overrides{})
	if got := problems(err); !strings.Contains(got["env.NOTES e.1"], limit+"environment variable") {
		t.Errorf("NOTES=value of %d bytes: %q", MaxArgLen+1, got)
	}

	// {training} is the rendered section: the base's long notes make it too long.
	base := fmt.Sprintf("training: {batch_size: 8, notes: %s}\n", strings.Repeat("n", MaxArgLen))
	_, err = sweepWithBase(t, base, "name: m\ncommand: [echo, \"{training}\"]\nconfig: {base: base.yaml}\nparams: {training: {batch_size: 32}}\njobs: [{}]\n")
	if got := problems(err); !strings.Contains(got["command[1] m.1"], limit+"argument") {
		t.Errorf("{training} with the base's notes: %q", got)
	}
	if _, err := sweepWithBase(t, "training: {batch_size: 8, notes: short}\n",
		"name: m\ncommand: [echo, \"{training}\"]\nconfig: {base: base.yaml}\nparams: {training: {batch_size: 32}}\njobs: [{}]\n"); err != nil {
		t.Errorf("{training} of a few bytes: %v", err)
	}
	// So do a dotted parameter set under it, and the base's section and the job's
	// mapping that are each within the limit and together over it.
	half := strings.Repeat("h", MaxArgLen/2+16)
	for what, doc := range map[string]string{
		"a dotted parameter": fmt.Sprintf("name: m\ncommand: [echo, \"{training}\"]\nconfig: {base: base.yaml}\nparams: {training: {batch_size: 32}, training.notes: %s}\njobs: [{}]\n", strings.Repeat("d", MaxArgLen)),
		"two halves":         fmt.Sprintf("name: m\ncommand: [echo, \"{training}\"]\nconfig: {base: base.yaml}\nparams: {training: {batch_size: 32, more: %s}}\njobs: [{}]\n", half),
	} {
		_, err = sweepWithBase(t, fmt.Sprintf("training: {batch_size: 8, notes: %s}\n", half), doc)
		if got := problems(err); !strings.Contains(got["command[1] m.1"], limit+"argument") {
			t.Errorf("{training} with %s: %q", what, got)
		}
	}
}

// TestOnPath: a program is found on a PATH as exec finds it, in the first of its
// absolute directories that has an executable file of its name: a relative directory
// (which exec refuses, and which depends on where the trainer runs), a file that is not
// executable and a directory of its name are passed over. gpuq submit checks with it
// what the trainer is started with, so what passes the one runs.
func TestOnPath(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"plain", "dir/train", "exe", "rel"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, path), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("plain/train", 0o644)
	write("exe/train", 0o755)
	write("rel/train", 0o755)
	t.Chdir(dir)
	path := strings.Join([]string{"rel", filepath.Join(dir, "plain"), filepath.Join(dir, "dir"), filepath.Join(dir, "exe")}, string(filepath.ListSeparator))
	if got, ok := OnPath("train", path); !ok || got != filepath.Join(dir, "exe", "train") {
		t.Errorf("OnPath(train) = %q, %v; want the one in exe", got, ok)
	}
	if got, ok := OnPath("train", "rel"); ok {
		t.Errorf("found %q through a relative directory", got)
	}
}
