package launcher

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestTrainerOutput: an attempt's log, passed on in pieces of any size, comes out as its
// trainer wrote it: without gpuq's header and closing line, but with every line of the
// trainer's own, those that look like gpuq's too; a log with no header is all output.
func TestTrainerOutput(t *testing.T) {
	header := Header(Command{Argv: []string{"python3", "train.py"}, Dir: "/tmp", Config: "/tmp/c.yaml",
		Set: []string{"A=1"}}, Attempt{JobID: "s.1", N: 2, Cards: []plans.Card{{Index: 3}}}, "")
	const ended = "\ngpuq: exited with status 0 after 3s\n"
	for _, tc := range []struct {
		name, log, want string
	}{
		{"lines", header + "epoch 1\nepoch 2\n" + ended, "epoch 1\nepoch 2\n"},
		{"a bar redrawn", header + "10%\r50%\r100%\n" + ended, "10%\r50%\r100%\n"},
		{"no line end", header + "done" + ended, "done"},
		{"nothing", header + ended, ""},
		{"gpuq's words", header + "\ngpuq: exited early, said the trainer\nmore\n" + ended, "\ngpuq: exited early, said the trainer\nmore\n"},
		{"cut short", header + "epoch 1\n", "epoch 1\n"},
		{"no header", "plain\n", "plain\n"},
		{"shorter than a header", "# gpu", "# gpu"},
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
			if err := w.Close(); err != nil || out.String() != tc.want {
				t.Errorf("%s in pieces of %d: %q %v, want %q", tc.name, size, out.String(), err, tc.want)
			}
		}
	}
}

// TestTrainerOutputIsLive: what the trainer has written comes out at once, less what
// may be the start of gpuq's closing line.
func TestTrainerOutputIsLive(t *testing.T) {
	var out strings.Builder
	w := TrainerOutput(&out)
	header := Header(Command{Argv: []string{"true"}}, Attempt{JobID: "s.1", N: 1}, "")
	for _, tc := range []struct{ write, want string }{
		{header + "loss 0.5", "loss 0.5"},
		{"\n", "loss 0.5"}, // a line end may begin gpuq's last line
		{"loss 0.4\n", "loss 0.5\nloss 0.4"},
		{"\rstep 3", "loss 0.5\nloss 0.4\n\rstep 3"},
	} {
		if _, err := w.Write([]byte(tc.write)); err != nil || out.String() != tc.want {
			t.Errorf("after %q: %q %v, want %q", tc.write, out.String(), err, tc.want)
		}
	}
}
