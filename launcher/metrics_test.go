package launcher

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// readingsText writes readings one a line, "step name value", for comparing.
func readingsText(rs []plans.Reading) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%d %s %v\n", r.Step, r.Name, r.Value)
	}
	return b.String()
}

// TestOutputLines: what a trainer prints that gpuq reads as metrics, and what it does not.
func TestOutputLines(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"Hugging Face Trainer's log dict, at the training bar's step", []string{
			"  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]",
			"{'loss': 2.31, 'grad_norm': 1.5, 'learning_rate': 4e-05, 'epoch': 0.5}",
		}, "50 epoch 0.5\n50 grad_norm 1.5\n50 learning_rate 4e-05\n50 loss 2.31\n"},
		{"its evaluation, whose bar is shorter than training's", []string{
			" 10%|█         | 100/1000 [00:20<03:00,  5.00it/s]",
			"100%|██████████| 109/109 [00:02<00:00, 45.20it/s]",
			"{'eval_loss': 0.91, 'eval_accuracy': np.float64(0.7123), 'eval_runtime': 2.4, 'epoch': 1.0}",
		}, "100 epoch 1\n100 eval_accuracy 0.7123\n100 eval_loss 0.91\n100 eval_runtime 2.4\n"},
		{"tensors, quoted numbers and what is no number", []string{
			"{'loss': tensor(1.25, device='cuda:0'), 'lr': '0.001', 'run': 'abc', 'ok': True}",
		}, "1 loss 1.25\n1 lr 0.001\n"},
		{"a diverged loss", []string{"{'loss': nan, 'epoch': 0.1}"}, "1 epoch 0.1\n1 loss NaN\n"},
		{"a printed JSON record with its step", []string{`{"step": 500, "loss": 1.92}`}, "500 loss 1.92\n"},
		{"dicts without a bar are numbered", []string{"{'loss': 2}", "{'loss': 1.5}"}, "1 loss 2\n2 loss 1.5\n"},
		{"tqdm postfix", []string{"train:  42%|████▏     | 420/1000 [01:02<01:26,  6.71it/s, loss=1.93, acc=0.612]"},
			"420 acc 0.612\n420 loss 1.93\n"},
		{"tqdm without a total", []string{"37it [00:03, 11.2it/s, loss=3.1]"}, "37 loss 3.1\n"},
		{"Lightning counts each epoch's batches anew", []string{
			"Epoch 2:  50%|█████     | 50/100 [00:05<00:05,  9.87it/s, v_num=0, train_loss=2.310]",
		}, "250 train_loss 2.31\n"},
		{"colours", []string{"\x1b[32m{'loss': 0.5}\x1b[0m"}, "1 loss 0.5\n"},
		{"no metrics", []string{
			"Loading checkpoint shards: 100%|██████████| 2/2 [00:01<00:00,  1.20it/s]",
			"epoch 3 loss 2.0", "{}", "{ not a dict", "[rank0]: {'a': 'b'}",
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lr := newLineReader()
			var got []plans.Reading
			for _, l := range tt.lines {
				rs, _ := lr.read(l)
				got = append(got, rs...)
			}
			if s := readingsText(got); s != tt.want {
				t.Errorf("got\n%swant\n%s", s, tt.want)
			}
		})
	}
}

// TestOutputMetricsFile: the output's metrics are written as records the tail reads,
// a progress bar's at most once a second (its latest when the output ends), split
// lines and carriage returns as a pty gives them.
func TestOutputMetricsFile(t *testing.T) {
	dir := t.TempDir()
	o := newOutputMetrics(dir)
	now := time.Unix(1000, 0)
	o.now = func() time.Time { return now }
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(o, "\r %d/100 [00:01<00:01, 9.9it/s, loss=%d]", i, 100-i)
		if i == 10 {
			now = now.Add(2 * time.Second)
		}
	}
	o.Write([]byte("\n{'eval_lo"))
	o.Write([]byte("ss': 0.75}\r\n"))
	fmt.Fprintf(o, "\r 40/100 [00:01<00:01, 9.9it/s, loss=60]\n")
	o.Write([]byte(strings.Repeat("x", maxMetricsLine+10) + "{'loss': 1}\n"))
	o.Close()
	got := readingsText(NewMetricsTail(dir).Read())
	want := "1 loss 99\n10 loss 90\n30 loss 70\n30 eval_loss 0.75\n40 loss 60\n"
	if got != want {
		t.Errorf("read back\n%swant\n%s", got, want)
	}
}

// TestMetricsTail: the trainer's file is read as it grows, a torn last line once it is
// whole; records without a step are numbered; once the trainer's file has a record,
// the output's are no longer read.
func TestMetricsTail(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, outputMetricsFile)
	os.WriteFile(out, []byte(`{"step": 5, "loss": 3}`+"\n"), 0o600)
	tail := NewMetricsTail(dir)
	if got := readingsText(tail.Read()); got != "5 loss 3\n" {
		t.Errorf("the output's, before the trainer writes: %q", got)
	}
	f, err := os.OpenFile(MetricsPath(dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(`{"loss": 2.5}` + "\n" + `{"step": 20, "eval_acc": 0.`)
	appendTo(t, out, `{"step": 6, "loss": 2.9}`+"\n")
	if got := readingsText(tail.Read()); got != "1 loss 2.5\n" {
		t.Errorf("the trainer's first record: %q", got)
	}
	f.WriteString("71}\nnot json\n{\"loss\": 2}\n")
	if got := readingsText(tail.Read()); got != "20 eval_acc 0.71\n3 loss 2\n" {
		t.Errorf("the rest, a torn line made whole: %q", got)
	}
	if got := tail.Read(); len(got) != 0 {
		t.Errorf("nothing new, yet %v", got)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

// TestAttemptMetrics: a trainer in a pty finds GPUQ_METRICS_FILE in its environment, and
// what it prints and writes there reaches the tail; an earlier run's files in the
// attempt's directory are gone first.
func TestAttemptMetrics(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(MetricsPath(dir), []byte(`{"step": 999, "stale": 1}`+"\n"), 0o600)
	script := `printf "{'loss': 2.5, 'epoch': 0.5}\n"; printf '{"step": 7, "eval_loss": 1.25}\n' >> "$GPUQ_METRICS_FILE"`
	for _, tt := range []struct {
		name, script, want string
	}{
		{"printed", `printf "{'loss': 2.5, 'epoch': 0.5}\n"`, "1 epoch 0.5\n1 loss 2.5\n"},
		{"written, which wins", script, "7 eval_loss 1.25\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Command{Argv: []string{"/bin/sh", "-c", tt.script}, Dir: dir,
				Env: append(os.Environ(), attemptDirVar+"="+dir, MetricsVar+"="+MetricsPath(dir))}
			p, err := Start(c, filepath.Join(dir, "log"), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			waitDone(t, p)
			if got := readingsText(NewMetricsTail(dir).Read()); got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRecordOfNonFinite(t *testing.T) {
	rec := recordOf([]plans.Reading{{Step: 3, Name: "loss", Value: math.NaN()}, {Step: 3, Name: "gn", Value: math.Inf(-1)}, {Step: 3, Name: "lr", Value: 1e-5}})
	rs, ok := plans.ParseMetricsRecord(rec, 1)
	if !ok || readingsText(rs) != "3 gn -Inf\n3 loss NaN\n3 lr 1e-05\n" {
		t.Errorf("%s read back as %v %v", rec, rs, ok)
	}
}
