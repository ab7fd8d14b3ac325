package plans

// The command checked against the machine before anything runs: a wrong trainer path
// found when eighteen jobs have failed is found too late.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxArgLen is the most bytes of one argument, or one NAME=value of the environment,
// that Linux passes a program: MAX_ARG_STRLEN, 32 pages of 4 KiB, less the NUL that
// ends it. execve refuses a longer one ("argument list too long") however short the
// rest is; a placeholder's value can make one that long (a long string, or a mapping
// such as {training}, which is the section the rendered config holds).
const MaxArgLen = 32*4096 - 1

// ArgTooLong says why an argument or environment variable (what) longer than MaxArgLen
// cannot reach a trainer, and what to do instead.
func ArgTooLong(what string) string {
	return fmt.Sprintf("longer than the %d KiB Linux passes a program in one %s (MAX_ARG_STRLEN), so the job could not start: "+
		"pass a value that large in a file the trainer reads, such as its rendered config (--config \"{config}\")", (MaxArgLen+1)>>10, what)
}

// readExts are the kinds of file an argument names for the trainer to read: code and
// configs. Data files and the like are left alone, since an argument may name an output
// that does not exist yet.
var readExts = []string{".py", ".sh", ".bash", ".pl", ".rb", ".jl", ".lua", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini"}

// outputOptions start the names of options whose value is written, not read
// (--output_dir, --save-path, --log_file).
var outputOptions = []string{"out", "save", "log", "dump", "write"}

// checkCommand checks that the command's program resolves, on the PATH the trainer
// gets or by its path in the workdir, and that every argument without placeholders that
// names a script or config exists in the workdir.
func (c *checker) checkCommand(s *Sweep, path string) {
	if len(s.Command) == 0 {
		return
	}
	job := everyJob
	if len(s.Jobs) == 1 {
		job = s.Jobs[0].ID
	}
	for _, e := range s.Env {
		if names, _ := Placeholders(e.Value); e.Name == "PATH" && len(names) == 0 {
			path = e.Value
		}
	}
	if msg := s.programProblem(s.Command[0], path); msg != "" {
		c.failJob("command[0]", job, "%s", msg)
	}
	for i := 1; i < len(s.Command); i++ {
		arg := s.Command[i]
		if opt, val, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(opt, "-") {
			if isOutput(opt) {
				continue
			}
			arg = val
		} else if isOutput(s.Command[i-1]) {
			continue
		}
		// An argument with blanks is a script of its own (sh -c "..."), not a path.
		if names, _ := Placeholders(arg); len(names) > 0 || strings.HasPrefix(arg, "-") || strings.ContainsAny(arg, " \t\n") ||
			!slices.Contains(readExts, strings.ToLower(filepath.Ext(arg))) {
			continue
		}
		if _, err := os.Stat(s.inWorkdir(arg)); err != nil {
			c.failJob(fmt.Sprintf("command[%d]", i), job, "%s does not exist in the workdir %s: fix the path (it is relative to the workdir, itself relative to the sweep file)", arg, s.Workdir)
		}
	}
}

// checkHook checks the notify command's program as the command's is checked: a hook
// that cannot run is found now, not when the sweep ends.
func (c *checker) checkHook(s *Sweep, path string) {
	if len(s.Notify.Command) == 0 {
		return
	}
	if msg := s.programProblem(s.Notify.Command[0], path); msg != "" {
		c.fail("notify.command[0]", "%s", msg)
	}
}

// programProblem says what is wrong with a command's program, or "".
func (s *Sweep) programProblem(prog, path string) string {
	if names, _ := Placeholders(prog); len(names) > 0 {
		return ""
	}
	if strings.ContainsRune(prog, '/') {
		p := s.inWorkdir(prog)
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			return fmt.Sprintf("%s does not exist in the workdir %s: fix the path, or name a program on the PATH", prog, s.Workdir)
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			return fmt.Sprintf("%s is not an executable file: chmod +x it, or run it with its interpreter, e.g. [python3, %s, ...]", prog, prog)
		}
		return ""
	}
	if _, ok := OnPath(prog, path); ok {
		return ""
	}
	if _, err := os.Stat(filepath.Join(s.Workdir, prog)); err == nil {
		return fmt.Sprintf("%s is not on the PATH; to run the one in the workdir, write ./%s", prog, prog)
	}
	return fmt.Sprintf("%s is not on the PATH: install it, activate the environment that has it before gpuq runs, or give its path", prog)
}

// OnPath finds the program name (no slash in it) on path, a PATH list, as exec finds
// it: the first executable file of that name in one of its directories, of those that
// are absolute (exec refuses what a relative one finds, which depends on where it runs).
// gpuq submit checks a sweep's program with it, and a trainer's is found with it on its
// own PATH: what passes the one runs.
func OnPath(name, path string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func (s *Sweep) inWorkdir(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Workdir, p)
}

func isOutput(opt string) bool {
	if !strings.HasPrefix(opt, "-") {
		return false
	}
	name := strings.ToLower(strings.TrimLeft(opt, "-"))
	return slices.ContainsFunc(outputOptions, func(p string) bool { return strings.HasPrefix(name, p) })
}
