package launcher

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestTrainerOutput: an attempt's log, passed on in pieces of any size, comes out as its
// trainer wrote it: without gpuq's header, however its quoted command and environment
// are written (blank lines and quotes in them), and without its closing line, but with
// every line of the trainer's own, those that look like gpuq's too; a log with no
// header is all output.
func TestTrainerOutput(t *testing.T) {
	header := Header(Command{Argv: []string{"sh", "-c", "echo one\n\necho 'two'"}, Dir: "/tmp/it's here", Config: "/tmp/c.yaml",
		Set: []string{"A=1", "B=x\n\ny"}}, Attempt{JobID: "s.1", JobName: "it's", N: 2, Cards: []plans.Card{{Index: 3}}}, "")
	const ended = "\ngpuq: exited with status 0 after 3s\n"
	for _, tc := range []struct {
		name, log string
		want      string
		split     string // what may come out where the closing line's own line end reaches it alone
	}{
		{"lines", header + "epoch 1\nepoch 2\n" + ended, "epoch 1\nepoch 2\n", ""},
		{"blank lines", header + "\n\nepoch 1\n\n" + ended, "\n\nepoch 1\n\n", ""},
		{"a bar redrawn", header + "10%\r50%\r100%\n" + ended, "10%\r50%\r100%\n", ""},
		{"no line end", header + "done" + ended, "done", "done\n"},
		{"nothing", header + ended, "", ""},
		{"gpuq's words", header + "gpuq: exited early, said the trainer\n\ngpuq: exited too\nmore\n" + ended,
			"gpuq: exited early, said the trainer\n\ngpuq: exited too\nmore\n", ""},
		{"cut short", header + "epoch 1\n", "epoch 1\n", ""},
		{"no header", "plain\n", "plain\n", ""},
		{"shorter than a header", "# gpu", "# gpu", ""},
	} {
		for _, size := range []int{1, 2, 7, 64, len(tc.log)} {
			var out strings.Builder
			w := TrainerOutput(&out)
			for rest := tc.log; rest != ""; {
				n := min(size, len(rest))
				if _, err := w.Write([]byte(rest[:n])); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			err := w.Close()
			if got := out.String(); err != nil || got != tc.want && (got != tc.split || size >= len(ended)) {
				t.Errorf("%s in pieces of %d: %q %v, want %q", tc.name, size, got, err, tc.want)
			}
		}
	}
}

// TestTrainerOutputIsLive: what the trainer has written comes out at once, each line
// with its line end; a blank line waits for what follows it, and what may begin gpuq's
// closing line for the rest of it.
func TestTrainerOutputIsLive(t *testing.T) {
	var out strings.Builder
	w := TrainerOutput(&out)
	header := Header(Command{Argv: []string{"true"}}, Attempt{JobID: "s.1", N: 1}, "")
	for _, tc := range []struct{ write, want string }{
		{header + "loss 0.5", "loss 0.5"},
		{"\n", "loss 0.5\n"},
		{"\n", "loss 0.5\n"},
		{"loss 0.4\ngpu", "loss 0.5\n\nloss 0.4"},
		{"s: 2\r", "loss 0.5\n\nloss 0.4\ngpus: 2\r"},
	} {
		if _, err := w.Write([]byte(tc.write)); err != nil || out.String() != tc.want {
			t.Errorf("after %q: %q %v, want %q", tc.write, out.String(), err, tc.want)
		}
	}
}
