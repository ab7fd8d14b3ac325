package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestBashCompletionWithoutBashCompletion sources `gpuq completion bash` in a bash that
// has not loaded the bash-completion package, and completes as the shell would.
func TestBashCompletionWithoutBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, errOut, code := gpuq(t, "completion", "bash")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	path := filepath.Join(t.TempDir(), "gpuq.bash")
	os.WriteFile(path, []byte(script), 0o644)
	complete := func(line string) []string {
		t.Helper()
		// The test binary runs as gpuq (see TestMain); words[0] is how the script calls it.
		line = os.Args[0] + " " + line
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `
if declare -F _get_comp_words_by_ref >/dev/null; then echo "bash-completion is loaded"; exit 3; fi
source "$1"
COMP_LINE=$2; COMP_POINT=${#2}
read -ra COMP_WORDS <<<"$2"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
[[ $2 == *" " ]] && COMP_CWORD=${#COMP_WORDS[@]}
__start_gpuq 2>/dev/null # compopt refuses outside a real completion
printf '%s\n' "${COMPREPLY[@]}"`, "bash", path, line)
		cmd.Env = append(os.Environ(), asGPUQ+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	if got := complete("stat"); len(got) != 1 || got[0] != "status" {
		t.Errorf("gpuq stat<TAB>: %q, want status", got)
	}
	if got := complete("plan --gpu-p"); len(got) != 1 || got[0] != "--gpu-plan" {
		t.Errorf("gpuq plan --gpu-p<TAB>: %q, want --gpu-plan", got)
	}
	if got := complete("completion "); strings.Join(got, " ") != "bash zsh fish powershell" {
		t.Errorf("gpuq completion <TAB>: %q", got)
	}
}

// TestCompletesFlagValues: --state completes the states, after those listed already;
// --sweep the daemon's sweeps (see TestSubmitOneOff), and nothing where none runs.
func TestCompletesFlagValues(t *testing.T) {
	t.Setenv("GPUQ_STATE_DIR", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "status", "--state", ""}, "queued\nheld\nblocked\nrunning\nsucceeded\nstopped\nfailed\ncancelled\n:4\n"},
		{[]string{"__complete", "ls", "--state", "running,fail"}, "running,queued\nrunning,held\nrunning,blocked\nrunning,succeeded\nrunning,stopped\nrunning,failed\nrunning,cancelled\n:4\n"},
		{[]string{"__complete", "cancel", "--sweep", ""}, ":4\n"},
	} {
		if out, _, code := gpuq(t, tc.args...); code != exitOK || out != tc.want {
			t.Errorf("gpuq %s: exit %d, %q; want %q", strings.Join(tc.args, " "), code, out, tc.want)
		}
	}
}

// TestCompletesDrainCards: drain and undrain complete the cards the daemon names: its
// own by index and its workers' as WORKER:INDEX, each with its memory, and a drained
// one says so; with no daemon, none.
func TestCompletesDrainCards(t *testing.T) {
	dir := daemonEnv(t)
	if out, _, code := cli(t, "__complete", "drain", ""); code != exitOK || out != ":4\n" {
		t.Errorf("no daemon: exit %d, %q; want no card", code, out)
	}
	startDaemon(t, "--listen", "127.0.0.1:0")
	addr, err := os.ReadFile(filepath.Join(dir, api.ListenFile))
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, strings.TrimSpace(string(addr)), "node7", func() {})
	if _, errOut, code := cli(t, "drain", "1"); code != exitOK {
		t.Fatalf("drain 1: exit %d: %s", code, errOut)
	}
	var out string
	schedtest.WaitFor(t, "the worker's card to be offered", func() bool {
		out, _, _ = cli(t, "__complete", "drain", "")
		return strings.Contains(out, "node7:0")
	})
	if want := "0\t24.00 GiB\n1\t24.00 GiB, drained\nnode7:0\t24.00 GiB\n:4\n"; out != want {
		t.Errorf("gpuq __complete drain \"\": %q; want %q", out, want)
	}
	if out, _, _ := cli(t, "__complete", "undrain", "node"); !strings.HasPrefix(out, "node7:0\t") || strings.Count(out, "\n") != 2 {
		t.Errorf("gpuq __complete undrain node: %q; want node7:0 alone", out)
	}
}
