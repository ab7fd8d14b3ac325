package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
)

// A one-off is a command given after -- to gpuq submit or gpuq run, as pueue add -- and
// sbatch --wrap take one: a sweep of one job, which gpuq writes itself and checks as it
// checks a sweep file. Its flags are the sweep keys a single command needs; --gpus,
// --gpu-plan and --headroom are the same flags as for a sweep. Its command is taken as
// written: a brace in it is a brace, not a placeholder.
type oneOff struct {
	memory, hostMemory, timeout, workdir string
	gpusPerJob, priority                 int
	env                                  []string
}

// oneOffFlags name the flags that set a one-off, and the sweep key each stands for.
var oneOffFlags = []struct{ flag, key string }{
	{"memory", "memory"}, {"host-memory", "host_memory"}, {"gpus-per-job", "gpus_per_job"},
	{"timeout", "timeout"}, {"priority", "priority"}, {"env", "env"}, {"workdir", "workdir"},
}

// addFlags adds the one-off's flags to fs; --name is the verb's own.
func (o *oneOff) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.memory, "memory", "", "with a command after --: its estimated peak per card (10GiB), or probe; default unknown: one job per card, as a sweep without memory")
	fs.StringVar(&o.hostMemory, "host-memory", "", "with a command after --: its host RAM (16GiB)")
	fs.IntVar(&o.gpusPerJob, "gpus-per-job", 1, "with a command after --: the cards it needs at once (torchrun)")
	fs.StringVar(&o.timeout, "timeout", "", "with a command after --: stop an attempt running longer (6h)")
	fs.IntVar(&o.priority, "priority", 0, "with a command after --: higher starts first")
	fs.StringArrayVar(&o.env, "env", nil, "with a command after --: KEY=VALUE set for it (again for more)")
	fs.StringVar(&o.workdir, "workdir", "", "with a command after --: where it runs (default here)")
}

// commandAfterDash splits a verb's arguments at --: the sweep files before it, the
// command after it; with a command, no sweep file may be named. A one-off's flags
// given without a command are refused: a sweep file says those itself.
func commandAfterDash(cmd *cobra.Command, args []string) (files, command []string, err error) {
	at := cmd.ArgsLenAtDash()
	if at < 0 {
		for _, f := range oneOffFlags {
			if cmd.Flags().Changed(f.flag) {
				return nil, nil, badInput("--%s is for a command after --; a sweep file says %s: itself", f.flag, f.key)
			}
		}
		return args, nil, nil
	}
	switch {
	case at > 0:
		return nil, nil, badInput("give sweep files or a command after --, not both: gpuq %s -- python3 train.py", cmd.Name())
	case len(args) == 0:
		return nil, nil, badInput("no command after --: gpuq %s -- python3 train.py --lr 1e-4", cmd.Name())
	}
	return nil, args, nil
}

// sweep is the one-off of argv as a sweep named name, checked against this machine as
// a sweep file is; label names it (gpuq submit -- python3 train.py), and a problem with
// one of its settings names the flag that gave it.
func (o *oneOff) sweep(label, name string, argv []string, ov plans.Overrides) (*plans.Sweep, []byte, error) {
	doc, err := o.document(name, argv)
	if err != nil {
		return nil, nil, err
	}
	sw, err := plans.LoadSource(label, doc, ov)
	if err != nil {
		return nil, nil, flagProblems(err, label)
	}
	return sw, doc, nil
}

// document is the one-off's sweep file, as JSON (which is YAML too, whatever the label
// ends in).
func (o *oneOff) document(name string, argv []string) ([]byte, error) {
	workdir, err := filepath.Abs(cmp.Or(o.workdir, "."))
	if err != nil {
		return nil, err
	}
	doc := plans.NewMap()
	doc.Set("name", name)
	command := make([]any, len(argv))
	for i, a := range argv {
		command[i] = literal(a)
	}
	doc.Set("command", command)
	doc.Set("workdir", workdir)
	for _, kv := range []struct {
		key string
		set bool
		v   any
	}{
		{"memory", o.memory != "", o.memory}, {"host_memory", o.hostMemory != "", o.hostMemory},
		{"gpus_per_job", o.gpusPerJob != 1, int64(o.gpusPerJob)}, {"timeout", o.timeout != "", o.timeout},
		{"priority", o.priority != 0, int64(o.priority)},
	} {
		if kv.set {
			doc.Set(kv.key, kv.v)
		}
	}
	env := plans.NewMap()
	for _, e := range o.env {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, badInput("--env %q: write KEY=VALUE", e)
		}
		env.Set(k, literal(v))
	}
	// It runs with the environment it was given in: where that sets what gpuq would
	// set for a sweep's trainer (OMP_NUM_THREADS=1 and friends), its value stands.
	for _, k := range launcher.DefaultedVars {
		if v, ok := os.LookupEnv(k); ok {
			if _, given := env.Get(k); !given {
				env.Set(k, literal(v))
			}
		}
	}
	if env.Len() > 0 {
		doc.Set("env", env)
	}
	// A command has no parameters for a ladder to lower: an OOM fails it, as written.
	oom := plans.NewMap()
	oom.Set("ladder", []any{})
	doc.Set("oom", oom)
	doc.Set("jobs", []any{plans.NewMap()})
	return json.Marshal(doc)
}

// literal is a one-off's argument as a template that gives it back as written.
func literal(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// flagProblems names, in a one-off's problems, the flag that gave the setting at fault,
// instead of the sweep file gpuq wrote.
func flagProblems(err error, label string) error {
	var probs plans.Problems
	if !errors.As(err, &probs) {
		return err
	}
	for _, p := range probs {
		if p.File != label {
			continue
		}
		key, _, _ := strings.Cut(strings.SplitN(p.Field, "[", 2)[0], ".")
		if i := slices.IndexFunc(oneOffFlags, func(f struct{ flag, key string }) bool { return f.key == key }); i >= 0 {
			p.File = "--" + oneOffFlags[i].flag
		} else if key == "name" {
			p.File = "--name"
		} else {
			p.File = label
		}
		p.Field, p.Job = "", ""
	}
	return probs
}

// oneOffName names a one-off after what it runs: its script (train.py: train), the
// module of python -m (pkg.train: train), or its program; made a sweep name (lowercase
// letters, digits, '.', '_', '-').
func oneOffName(argv []string) string {
	what := argv[0]
	for i, a := range argv {
		if a == "-m" && i+1 < len(argv) {
			mod := argv[i+1]
			what = mod[strings.LastIndexByte(mod, '.')+1:]
			break
		}
		if ext := filepath.Ext(a); !strings.HasPrefix(a, "-") && (ext == ".py" || ext == ".sh") {
			what = strings.TrimSuffix(filepath.Base(a), ext)
			break
		}
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, filepath.Base(what))
	name = strings.Trim(name, "-._")
	if len(name) > 30 {
		name = strings.Trim(name[:30], "-._")
	}
	return cmp.Or(name, "job")
}

// oneOffLabel names a one-off in messages and the daemon's log: the command line.
func oneOffLabel(verb string, argv []string) string {
	return fmt.Sprintf("gpuq %s -- %s", verb, shellQuote(argv))
}

// freeName is base, or base-2, base-3, ... the first of them that is none of taken.
func freeName(base string, taken map[string]bool) string {
	name := base
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	return name
}
