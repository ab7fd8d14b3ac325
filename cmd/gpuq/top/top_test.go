package top

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

const gib = 1 << 30

// fakeSource is a daemon that answers with a fixed overview and records requests.
type fakeSource struct {
	mu   sync.Mutex
	ov   api.Overview
	err  error // Overview's, when set
	acts []string
	logs map[string]string // each job's log
	// ended is how each job's attempt ended, where it has
	ended map[string]string
}

func (f *fakeSource) Overview() (api.Overview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ov, f.err
}

func (f *fakeSource) Act(v api.Verb, sel api.SelectRequest) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf("%s %s", v, strings.Join(sel.IDs, ",")))
	return sel.IDs, nil
}

func (f *fakeSource) DrainCard(req api.DrainRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf("drain %s %v", plans.CardID{Worker: req.Worker, Index: req.GPU}, req.On))
	return nil
}

func (f *fakeSource) Job(id string) (api.Job, error) {
	p, ok := f.logs[id]
	if !ok {
		return api.Job{}, errors.New("no attempt")
	}
	return api.Job{JobSummary: api.JobSummary{ID: id, Attempts: []api.AttemptSummary{{N: 1, Log: p, Outcome: f.ended[id]}}}}, nil
}

// sampleOverview is a 4-card machine with three running jobs (one logging a tqdm bar),
// a queue with a held job, a foreign process, a drained card and recent events.
func sampleOverview(t *testing.T) api.Overview {
	log := filepath.Join(t.TempDir(), "log")
	tqdm := "epoch 1\n\r 10%|█         | 100/1000\r 45%|████▌     | 450/1000 [00:10<00:12, 40it/s]"
	if err := os.WriteFile(log, []byte("\x1b[32mstarting\x1b[0m\n"+tqdm), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 15, 4, 5, 0, time.UTC)
	half := 0.45
	return api.Overview{Time: now, Simulated: "sim:4x24GiB",
		GPUs: []api.GPUView{
			{Index: 0, TotalBytes: 24 * gib, UsedBytes: 20 * gib, HeadroomBytes: gib * 6 / 5, Slots: 2, Busy: 2, Utilization: 97, Temperature: 71,
				Jobs: []api.Holding{{Job: "gla.1", UsedBytes: 13 * gib, ReservedBytes: 14 * gib}, {Job: "gla.2", UsedBytes: 6 * gib, ReservedBytes: 9 * gib}}, OtherBytes: gib},
			{Index: 1, TotalBytes: 24 * gib, UsedBytes: 2 * gib, HeadroomBytes: gib * 6 / 5, Slots: -1, Busy: 1, Utilization: -1, Temperature: -1,
				Jobs: []api.Holding{{Job: "gla.3", UsedBytes: 2 * gib, ReservedBytes: 10 * gib}}},
			{Index: 2, TotalBytes: 24 * gib, HeadroomBytes: gib * 6 / 5, Slots: 1, Utilization: 0, Temperature: 35, Drained: true},
			{Index: 3, TotalBytes: 24 * gib, Slots: 1, Fault: "NVML: GPU is lost"},
		},
		Running: []api.RunningJob{
			{Job: "gla.1", Name: "qnli,seed=87", GPUs: []int{0}, Attempt: 2, Tier: 1, Started: now.Add(-62 * time.Minute),
				DeclaredBytes: 11 * gib, LearnedBytes: 14 * gib, CurrentBytes: 13 * gib, Log: log, Util: &half},
			{Job: "gla.2", Name: "sst2,seed=87", GPUs: []int{0}, Attempt: 1, Started: now.Add(-5 * time.Minute),
				DeclaredBytes: 9 * gib, CurrentBytes: 6 * gib},
			{Job: "gla.3", Name: "cola,seed=87", GPUs: []int{1}, Attempt: 1, Started: now.Add(-40 * time.Second),
				DeclaredBytes: 10 * gib, CurrentBytes: 2 * gib},
		},
		Queue: []api.WaitingJob{
			{Job: "gla.4", Name: "rte,seed=87", EstimateBytes: 14 * gib, Reason: "no-memory: 14.00 GiB needed, 3.20 GiB free at most (GPU 1)"},
			{Job: "gla.5", Name: "rte,seed=88", Held: true, EstimateBytes: 14 * gib, Reason: "held: gpuq release gla.5 lets it start"},
		},
		Events: []api.Event{
			{Time: now.Add(-64 * time.Minute), Job: "gla.1", Attempt: 1, Kind: "gpu-oom", Message: "tried to allocate 2.00 GiB; next: tier 1 (gradient_checkpointing=true)"},
			{Time: now.Add(-63 * time.Minute), Job: "GPU 3", Kind: "out-of-service", Message: "NVML: GPU is lost"},
			{Time: now.Add(-10 * time.Minute), Job: "gla.0", Attempt: 1, Kind: "failed", Message: "attempt 1 failed: exited with status 1"},
		}}
}

func asciiModel(src Source) model {
	r := lipgloss.NewRenderer(&bytes.Buffer{})
	r.SetColorProfile(termenv.Ascii)
	return newModel(Options{Source: src, Title: "the daemon on /state"}, r)
}

// drive feeds messages to the model as the program would, with what the commands they
// return answer, and returns the model.
func drive(t *testing.T, m model, msgs ...tea.Msg) model {
	t.Helper()
	for _, msg := range msgs {
		m = feed(t, m, msg)
	}
	return m
}

// feed gives the model a message and runs the command it returns; it stops at a new
// overview, since what follows one is the next tick.
func feed(t *testing.T, m model, msg tea.Msg) model {
	t.Helper()
	next, cmd := m.Update(msg)
	if _, ok := msg.(overviewMsg); ok {
		return next.(model)
	}
	return settle(t, next.(model), cmd)
}

func settle(t *testing.T, m model, cmd tea.Cmd) model {
	t.Helper()
	if cmd == nil {
		return m
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a command did not return")
	}
	switch msg := msg.(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			m = settle(t, m, c)
		}
		return m
	case tea.QuitMsg, nil:
		return m
	}
	return feed(t, m, msg)
}

func keysOf(s ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range s {
		switch k {
		case "enter":
			out = append(out, tea.KeyPressMsg{Code: tea.KeyEnter})
		case "esc":
			out = append(out, tea.KeyPressMsg{Code: tea.KeyEscape})
		case "down":
			out = append(out, tea.KeyPressMsg{Code: tea.KeyDown})
		default:
			// A key a character, as Bubble Tea sends them however fast they come.
			for _, r := range k {
				out = append(out, tea.KeyPressMsg{Code: r, Text: string(r)})
			}
		}
	}
	return out
}

// TestScreen80x24: the whole view fits an 80×24 terminal (what ssh gives by default):
// 24 lines, none wider than 80, and says what the golden file says.
func TestScreen80x24(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	screen := m.screen()
	lines := strings.Split(screen, "\n")
	if len(lines) != 24 {
		t.Errorf("%d lines, want 24", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i+1, w, l)
		}
	}
	schedtest.Golden(t, "screen-80x24.txt", screen)
}

// m0 are the messages that bring the first overview in.
func m0(src *fakeSource) []tea.Msg {
	return []tea.Msg{overviewMsgOf(src)}
}

func overviewMsgOf(src *fakeSource) tea.Msg {
	return newModel(Options{Source: src}, lipgloss.NewRenderer(&bytes.Buffer{})).fetch()()
}

// TestKeys: each key sends its request for the selected job, or does what it says.
func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want []string // requests the daemon gets
	}{
		{"cancel asks first", []string{"c", "y"}, []string{"cancel gla.1"}},
		{"cancel needs a yes", []string{"c", "n"}, nil},
		{"hold the queued job", []string{"j", "j", "j", "h"}, []string{"hold gla.4"}},
		{"a held job is released", []string{"j", "j", "j", "j", "h"}, []string{"release gla.5"}},
		{"retry the failed job of the events", []string{"/", "f", "a", "i", "l", "e", "d", "enter", "r"}, []string{"retry gla.0"}},
		{"drain a card", []string{"d", "1", "enter"}, []string{"drain 1 true"}},
		{"undrain a drained card", []string{"d", "2", "enter"}, []string{"drain 2 false"}},
		{"no such card", []string{"d", "9", "enter"}, nil},
		{"the filter narrows the list", []string{"/", "s", "s", "t", "enter", "c", "y"}, []string{"cancel gla.2"}},
		{"keys that arrive together", []string{"jjjh"}, []string{"hold gla.4"}},
		{"a filter typed at once", []string{"/sst", "enter", "cy"}, []string{"cancel gla.2"}},
		{"esc clears the filter", []string{"/", "s", "s", "t", "enter", "esc", "j", "c", "y"}, []string{"cancel gla.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{ov: sampleOverview(t)}
			m := drive(t, asciiModel(src), m0(src)...)
			drive(t, m, keysOf(tt.keys...)...)
			if strings.Join(src.acts, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("requests %q, want %q", src.acts, tt.want)
			}
		})
	}
}

// TestWorkersCards: a worker's card is named node7:1 on screen and drained by that
// name, not mistaken for the daemon's GPU 1.
func TestWorkersCards(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.ov.GPUs = append(src.ov.GPUs, api.GPUView{Worker: "node7", Index: 1, TotalBytes: 80 * gib, Slots: -1})
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if screen := m.screen(); !strings.Contains(screen, "GPU node7:1 ") || !strings.Contains(screen, "GPU 1       ") {
		t.Errorf("cards not named by machine:\n%s", screen)
	}
	drive(t, m, keysOf("d", "node7:1", "enter", "d", "node8:1", "enter")...)
	if got := strings.Join(src.acts, "; "); got != "drain node7:1 true" {
		t.Errorf("requests %q, want drain node7:1 true", got)
	}
}

// TestLogsKey: l shows the end of the selected job's log, tqdm's bar as last drawn;
// esc goes back.
func TestLogsKey(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.logs = map[string]string{"gla.1": src.ov.Running[0].Log}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = drive(t, m, keysOf("l")...)
	screen := m.screen()
	if m.mode != reading || !strings.Contains(screen, "starting") || !strings.Contains(screen, "45%|████▌") || strings.Contains(screen, "10%") {
		t.Errorf("log view:\n%s", screen)
	}
	m = drive(t, m, keysOf("esc")...)
	if m.mode != browsing {
		t.Error("esc did not leave the log")
	}
}

func TestQuit(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	_, cmd := m.Update(keysOf("q")[0])
	if cmd == nil || fmt.Sprint(cmd()) != fmt.Sprint(tea.Quit()) {
		t.Error("q did not quit")
	}
}

// TestPrint: without a terminal, top prints the overview once, whole, as plain text;
// its title line (a title that fits) and bars fit 80 columns.
func TestPrint(t *testing.T) {
	var buf bytes.Buffer
	if err := Print(&buf, sampleOverview(t), Options{Title: "the daemon on /state"}, 80); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\x1b[") {
		t.Errorf("escape codes in plain output:\n%q", buf.String())
	}
	schedtest.Golden(t, "print.txt", buf.String())
}

// TestTitleGivesWayToTheClock: on a terminal, a title too long for the line is cut,
// and the clock keeps its corner; printed, the title is whole, and where it does not
// fit beside the clock it breaks between its parts, the clock in the first line's
// corner, every line within the width: gpuq top | head of a daemon on simulated cards
// printed 81 columns at 80, and the terminal wrapped the clock onto a line of its own.
func TestTitleGivesWayToTheClock(t *testing.T) {
	title := "the daemon on /scratch/a-rather-long-directory-name/of/this/user/gpuq-state"
	src := &fakeSource{ov: sampleOverview(t)}
	m := asciiModel(src)
	m.opts.Title = title
	m = drive(t, m, m0(src)...)
	for _, width := range []int{80, 60} {
		m = drive(t, m, tea.WindowSizeMsg{Width: width, Height: 24})
		head, _, _ := strings.Cut(m.screen(), "\n")
		if w := ansi.StringWidth(head); w != width || !strings.HasSuffix(head, " 15:04:05") || !strings.Contains(head, "…") {
			t.Errorf("title line at %d columns is %d wide: %q", width, w, head)
		}
	}
	for _, tc := range []struct {
		title string
		want  []string // the first lines
	}{
		{title, []string{"gpuq top · SIMULATED GPUs sim:4x24GiB   ", title, "GPU 0  "}},
		{"the daemon on /tmp/gq.mTDF/state", []string{"gpuq top · SIMULATED GPUs sim:4x24GiB   ", "the daemon on /tmp/gq.mTDF/state", "GPU 0  "}},
		{"the daemon on /tmp/gq/state", []string{"gpuq top · SIMULATED GPUs sim:4x24GiB · the daemon on /tmp/gq/state   ", "GPU 0  "}},
	} {
		var buf bytes.Buffer
		if err := Print(&buf, sampleOverview(t), Options{Title: tc.title}, 80); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(buf.String(), "\n")
		for i, want := range tc.want {
			if !strings.HasPrefix(lines[i], want) {
				t.Errorf("printed, %q: line %d is %q; want %q", tc.title, i+1, lines[i], want)
			}
		}
		if w := ansi.StringWidth(lines[0]); w != 80 || !strings.HasSuffix(lines[0], " 15:04:05") {
			t.Errorf("printed, %q: the title line is %d wide, not 80, or not the clock's in its corner: %q", tc.title, w, lines[0])
		}
		for _, l := range lines[1:len(tc.want)] {
			if w := ansi.StringWidth(l); w > 80 {
				t.Errorf("printed, %q: %q is %d wide, more than 80", tc.title, l, w)
			}
		}
	}
}

// TestCardSlots: a card shows its jobs of its plan's slots, or, with no limit, its
// jobs alone.
func TestCardSlots(t *testing.T) {
	m := newModel(Options{}, lipgloss.NewRenderer(&bytes.Buffer{}))
	for _, tt := range []struct {
		slots, busy int
		want        string
	}{{2, 1, " 1/2 "}, {1, 0, " 0/1 "}, {-1, 2, "   2 "}, {-1, 0, "   0 "}} {
		got := m.stats(api.GPUView{TotalBytes: 24 << 30, Slots: tt.slots, Busy: tt.busy, Utilization: -1, Temperature: -1})
		if !strings.Contains(got, tt.want) || strings.Contains(got, "/-") {
			t.Errorf("slots %d, busy %d: %q, want %q in it", tt.slots, tt.busy, got, tt.want)
		}
	}
}

// TestHostileTextReachesNoTerminal: what a trainer prints, a sweep's parameters and a
// worker's report reach the screen with nothing a terminal acts on: no escape sequence,
// no control character but the line breaks, and no C1 control (U+009D and U+009B are
// OSC and CSI to a terminal that reads UTF-8: a title, the clipboard, a cleared screen).
func TestHostileTextReachesNoTerminal(t *testing.T) {
	const hostile = "\x1b]0;title\x07|\u009d52;c;cHduZWQ=\u009c|\x0e|\x08|\u009b2J|\x1b[2J|\x7f"
	ov := sampleOverview(t)
	if err := os.WriteFile(ov.Running[0].Log, []byte("starting\nstep 7 "+hostile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ov.Simulated += hostile
	ov.GPUs[3].Fault += hostile
	ov.Queue[0].Reason += hostile
	ov.Queue[0].Requeued = "requeued after gpu-oom" + hostile
	ov.Events[2].Message += hostile
	check := func(where, screen string) {
		t.Helper()
		for _, r := range screen {
			if r != '\n' && unicode.IsControl(r) {
				t.Errorf("%s: control character %U reaches the terminal:\n%q", where, r, screen)
				return
			}
		}
		if !strings.Contains(screen, "step 7 |52;c;cHduZWQ=|||2J||") {
			t.Errorf("%s: the trainer's line is not shown, less its controls:\n%s", where, screen)
		}
	}
	var buf bytes.Buffer
	if err := Print(&buf, ov, Options{Title: "the daemon on /state"}, 100); err != nil {
		t.Fatal(err)
	}
	check("printed", buf.String())
	src := &fakeSource{ov: ov, logs: map[string]string{"gla.1": ov.Running[0].Log}}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 200, Height: 40})
	check("on screen", m.screen())
	m = drive(t, m, keysOf("l")...)
	check("its log", m.screen())
}

// TestTheSelectedRowIsAlwaysDrawn: a list longer than its lines is drawn around the
// selection, whichever row it is: the selected row among those drawn, a line for the
// rows left out above and one for those below where there is room, and never more
// lines than given. (The selection could sit behind "… N more" and a key act on a job
// nobody saw.)
func TestTheSelectedRowIsAlwaysDrawn(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for rows := n + 1; rows <= 14; rows++ {
			for sel := range rows {
				start, end := window(rows, n, sel)
				lines := end - start
				if n >= 3 {
					if start > 0 {
						lines++
					}
					if end < rows {
						lines++
					}
				}
				if sel < start || sel >= end || start < 0 || end > rows || lines > n || lines < min(n, 3) {
					t.Fatalf("%d rows in %d lines, row %d selected: rows %d to %d (%d lines)", rows, n, sel, start, end, lines)
				}
			}
		}
	}
	// On screen: the seventh of eight running jobs in five lines.
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	var jobs []string
	for i := range 8 {
		jobs = append(jobs, fmt.Sprintf("r.%d", i+1))
	}
	rows := make([]row, len(jobs))
	for i, id := range jobs {
		rows[i] = row{key: id, job: id, text: id}
	}
	m.sel = "r.7"
	got := strings.Join(m.window(rows, 5), "\n")
	if !strings.Contains(got, ">r.7") || !strings.Contains(got, "above") || !strings.Contains(got, "… 1 more") {
		t.Errorf("r.7 selected of 8 in 5 lines:\n%s", got)
	}
}

// TestALongJobIDLosesItsStart: an id longer than the screen has room for loses its
// start, as the README says ("…long-name.12"), so that every column stays under its
// header; a screen with room shows it whole (the column stopped at 20 cells however
// wide the screen), and the declared and learned memory do not give way to its start.
func TestALongJobIDLosesItsStart(t *testing.T) {
	const id = "ux2-with-a-rather-long-sweep-name.3"
	ov := sampleOverview(t)
	ov.Running[1].Job = id
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	for _, tc := range []struct {
		width  int
		shown  string // the id as shown
		memory bool   // DECLARED and LEARNED shown
	}{
		{200, id, true},
		{100, "…-rather-long-sweep-name.3", true},
		{80, "…ther-long-sweep-name.3", false},
	} {
		m = drive(t, m, tea.WindowSizeMsg{Width: tc.width, Height: 50})
		var header, line string
		for _, l := range strings.Split(m.screen(), "\n") {
			switch {
			case strings.Contains(l, "RUNNING"):
				header = l
			case strings.Contains(l, "sweep-name.3"):
				line = l
			}
		}
		if !strings.Contains(line, " "+tc.shown+" ") || strings.Contains(header, "DECLARED") != tc.memory {
			t.Errorf("at %d columns, want the id as %q and the memory %v:\n%s\n%s", tc.width, tc.shown, tc.memory, header, line)
		}
		cell := func(s, sub string) int { return ansi.StringWidth(s[:max(0, strings.Index(s, sub))]) }
		if h, l := cell(header, "NAME"), cell(line, "sst2,seed=87"); h == 0 || h != l {
			t.Errorf("at %d columns, NAME at cell %d, the name at %d:\n%s\n%s", tc.width, h, l, header, line)
		}
	}
}

// TestALongNameLosesItsKeysFirst: a name longer than its column is cut as gpuq run's
// summary and gpuq results cut one (CutName): its keys give way before its values, and
// the start of its task (the sweep's prefix) before its numbers, so that the learning
// rate that tells two jobs apart stays, in the running list and the queue alike. At
// 106 columns the name column has 24 cells.
func TestALongNameLosesItsKeysFirst(t *testing.T) {
	const name = "glue-tvt_qnli,learning_rate=3e-4,seed=87"
	ov := sampleOverview(t)
	ov.Running[1].Name, ov.Queue[0].Name = name, name
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 106, Height: 50})
	v := m.screen()
	if n := strings.Count(v, " …-tvt_qnli,l…=3e-4,s…=87 "); n != 2 {
		t.Errorf("the long name is cut by its keys on %d lines, want 2:\n%s", n, v)
	}
}

// TestANameTakesTheRoomTheScreenHas: a long name is whole where the screen has room
// for it (the column stopped at 24 cells however wide the screen, and cut names with
// room to spare), and takes what room there is where it has less. Past its first 24
// cells it comes after the other columns: at 120 the declared and learned memory stay
// and the ids are whole, and at 80 those give way as they do to short names. Each
// list's names stay under NAME, and every line fits the screen.
func TestANameTakesTheRoomTheScreenHas(t *testing.T) {
	const name, id = "glue-benchmark-qnli,learning_rate=0.0001,seed=87", "glue-long-names.2"
	ov := sampleOverview(t)
	ov.Running[1].Name, ov.Queue[0].Name = name, name
	ov.Running[1].Job = id
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	for _, tc := range []struct {
		width    int
		name, id string // as shown
		memory   bool   // DECLARED and LEARNED shown
	}{
		{200, name, id, true},
		{120, "…mark-qnli,l…=0.0001,s…=87", id, true},
		{80, "…k-qnli,0.0001,87", "…ong-names.2", false},
	} {
		m = drive(t, m, tea.WindowSizeMsg{Width: tc.width, Height: 50})
		v := m.screen()
		if n := strings.Count(v, " "+tc.name+" "); n != 2 || !strings.Contains(v, " "+tc.id+" "+tc.name+" ") || strings.Contains(v, "DECLARED") != tc.memory {
			t.Errorf("at %d columns, want the name as %q on 2 lines (%d), the id as %q, and the memory %v:\n%s", tc.width, tc.name, n, tc.id, tc.memory, v)
		}
		cell := func(s, sub string) int { return ansi.StringWidth(s[:max(0, strings.Index(s, sub))]) }
		var header string
		for _, l := range strings.Split(v, "\n") {
			switch {
			case strings.Contains(l, "NAME"):
				header = l
			case strings.Contains(l, tc.name):
				if h, c := cell(header, "NAME"), cell(l, tc.name); h == 0 || h != c {
					t.Errorf("at %d columns, NAME at cell %d, the name at %d:\n%s\n%s", tc.width, h, c, header, l)
				}
			}
			if w := ansi.StringWidth(l); w > tc.width {
				t.Errorf("at %d columns, a line %d wide: %q", tc.width, w, l)
			}
		}
	}
}

// TestAttachIsOfARunningJob: a on a queued job says that only a running trainer's
// terminal can be attached, on top's own screen, and runs no gpuq attach (whose
// refusal went to the screen top hid, leaving "exit status 2").
func TestAttachIsOfARunningJob(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := asciiModel(src)
	var attached []string
	m.opts.Attach = func(job string) *exec.Cmd { attached = append(attached, job); return exec.Command("true") }
	m = drive(t, m, m0(src)...)
	m = drive(t, m, keysOf("j", "j", "j", "a")...) // gla.4, queued
	if len(attached) != 0 || !strings.Contains(m.screen(), "gla.4 is not running") {
		t.Errorf("attached %v; the screen:\n%s", attached, m.screen())
	}
}

// TestADaemonThatStopsIsSaidInAFewWords: when the daemon stops answering, top says so
// in the line it has, not a socket's path and a URL cut off before the reason.
func TestADaemonThatStopsIsSaidInAFewWords(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	src.err = fmt.Errorf("gpuq daemon on /tmp/ux-state: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT})
	m = drive(t, m, overviewMsgOf(src))
	if v := m.screen(); !strings.Contains(v, "the daemon does not answer (stopped, or restarting)") || strings.Contains(v, "/tmp/ux-state") ||
		!strings.Contains(v, "as of 15:04:05") {
		t.Errorf("the screen:\n%s", v)
	}
}

// TestADaemonThatStoppedIsSaidToHaveStopped: a daemon that said, as it stopped, that it
// did is said to have stopped, and when; top asks again, and shows the daemon that
// comes back. A gpuq run that does not answer is not called a daemon.
func TestADaemonThatStoppedIsSaidToHaveStopped(t *testing.T) {
	dir := t.TempDir()
	src := &fakeSource{ov: sampleOverview(t)}
	m := asciiModel(src)
	m.opts.StateDir = dir
	m = drive(t, m, m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 100, Height: 24})
	if err := api.MarkStopping(dir, 4242, true); err != nil {
		t.Fatal(err)
	}
	src.err = fmt.Errorf("gpuq daemon on %s: %w", dir, &net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT})
	next, cmd := m.Update(m.fetch()())
	m = next.(model)
	if v := m.screen(); !strings.Contains(v, "the daemon (pid 4242) stopped at ") || !strings.Contains(v, "(gpuq daemon --stop); top asks again until one runs") ||
		!strings.Contains(v, "as of 15:04:05") || !strings.Contains(v, "RUNNING 3") {
		t.Errorf("the screen:\n%s", v)
	}
	if cmd == nil {
		t.Error("top stopped asking the daemon")
	}
	src.err = nil
	src.ov.Time = src.ov.Time.Add(time.Minute)
	m = drive(t, m, m.fetch()())
	if v := m.screen(); strings.Contains(v, "stopped") || strings.Contains(v, "as of") || !strings.Contains(v, "15:05:05") {
		t.Errorf("the daemon back:\n%s", v)
	}

	run := api.Run{Sweep: "gla", PID: 4242, Socket: filepath.Join(dir, "gla.4242.sock")}
	m.opts.Run, m.opts.Title = &run, "gpuq run of gla (pid 4242)"
	src.err = fmt.Errorf("gpuq daemon on %s: %w", dir, io.ErrUnexpectedEOF)
	m = drive(t, m, m.fetch()())
	if v := m.screen(); !strings.Contains(v, "the gpuq run does not answer") || strings.Contains(v, "daemon") {
		t.Errorf("a run that does not answer:\n%s", v)
	}
}

// TestALogFollowedStaysFollowedAsTheTerminalShrinks: a log read at its end is still at
// its end once the terminal is smaller, so that the next reading follows it.
func TestALogFollowedStaysFollowedAsTheTerminalShrinks(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	var long strings.Builder
	for i := range 40 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	long.WriteString("the last line")
	logPath := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(logPath, []byte(long.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	src.ov.Running[0].Log = logPath
	src.logs = map[string]string{"gla.1": logPath}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = drive(t, m, keysOf("l")...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 60, Height: 10})
	if !m.logs.AtBottom() || !strings.Contains(m.screen(), "the last line") {
		t.Errorf("after the terminal shrank, the log view:\n%s", m.screen())
	}
}

// TestNamesBeforeMemoryOnANarrowScreen: where the declared and learned memory would
// cut the jobs' names (80 columns), they give way and the names are whole; a wide
// screen shows both.
func TestNamesBeforeMemoryOnANarrowScreen(t *testing.T) {
	for _, tc := range []struct {
		width  int
		memory bool
	}{{80, false}, {120, true}} {
		src := &fakeSource{ov: sampleOverview(t)}
		m := drive(t, asciiModel(src), m0(src)...)
		m = drive(t, m, tea.WindowSizeMsg{Width: tc.width, Height: 24})
		v := m.screen()
		if !strings.Contains(v, "qnli,seed=87") || strings.Contains(v, "DECLARED") != tc.memory || strings.Contains(v, "LEARNED") != tc.memory {
			t.Errorf("%d columns: names whole, and the declared and learned memory %v:\n%s", tc.width, tc.memory, v)
		}
	}
}

// TestAFilterCountsWhatItShows: while a filter hides some jobs, a list's title says how
// many it shows of how many; without one, how many there are.
func TestAFilterCountsWhatItShows(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 40})
	running, queued := len(src.ov.Running), len(src.ov.Queue)
	if v := m.screen(); !strings.Contains(v, fmt.Sprintf("RUNNING %d ", running)) || !strings.Contains(v, fmt.Sprintf("QUEUE %d ", queued)) {
		t.Errorf("without a filter, the titles do not count %d running and %d queued:\n%s", running, queued, v)
	}
	m = drive(t, m, keysOf("/sst", "enter")...)
	if v := m.screen(); !strings.Contains(v, fmt.Sprintf("RUNNING 1 of %d ", running)) || !strings.Contains(v, fmt.Sprintf("QUEUE 0 of %d ", queued)) {
		t.Errorf("filtered by sst, the titles do not say 1 of %d running and 0 of %d queued:\n%s", running, queued, v)
	}
}

// TestOfSweepListsItsJobsAlone: --sweep e1 lists e1's jobs by their ids, not those of
// gla-e1 nor a job whose reason names e1.1.
func TestOfSweepListsItsJobsAlone(t *testing.T) {
	ov := api.Overview{
		Running: []api.RunningJob{{Job: "e1.1"}, {Job: "gla-e1.3"}},
		Queue:   []api.WaitingJob{{Job: "e1.2"}, {Job: "x.1", Reason: "it runs after e1.1"}},
		Events:  []api.Event{{Job: "e1.1", Kind: "started"}, {Job: "gla-e1.3", Kind: "started"}, {Job: "GPU 0", Kind: "drained"}},
	}
	got := ofSweep(ov, "e1")
	if len(got.Running) != 1 || got.Running[0].Job != "e1.1" || len(got.Queue) != 1 || got.Queue[0].Job != "e1.2" || len(got.Events) != 1 {
		t.Errorf("of e1: %+v", got)
	}
	if all := ofSweep(ov, ""); len(all.Running) != 2 || len(all.Events) != 3 {
		t.Errorf("of no sweep: %+v", all)
	}
	if len(ov.Running) != 2 {
		t.Error("the overview given was changed")
	}
}

// TestLongCardNamesKeepTheColumnsInLine: a worker's cards, named by its host name
// (gpu-node-12:3), widen the GPU column rather than push the columns after it out of
// line.
func TestLongCardNamesKeepTheColumnsInLine(t *testing.T) {
	ov := sampleOverview(t)
	ov.Running[1].Worker, ov.Running[1].GPUs = "gpu-node-12", []int{3}
	var buf bytes.Buffer
	if err := Print(&buf, ov, Options{}, 120); err != nil {
		t.Fatal(err)
	}
	var tiers []int
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "RUNNING") {
			tiers = append(tiers, strings.Index(line, "TIER"))
		}
		for _, tier := range []string{" t0 ", " t1 "} {
			if i := strings.Index(line, tier); i >= 0 && strings.HasPrefix(line, " gla.") {
				tiers = append(tiers, ansi.StringWidth(line[:i+1]))
			}
		}
	}
	if len(tiers) != 4 || slices.Min(tiers) != slices.Max(tiers) {
		t.Errorf("the TIER column starts at %v, not in one place:\n%s", tiers, buf.String())
	}
}

// TestAWorkersCardsAwayAreKept: the cards of a worker that is away are drawn, marked
// away, with since when and what becomes of their jobs, rather than left out.
func TestAWorkersCardsAwayAreKept(t *testing.T) {
	ov := sampleOverview(t)
	away := &api.WorkerAway{Since: ov.Time.Add(-10 * time.Second), Until: ov.Time.Add(110 * time.Second)}
	ov.GPUs = append(ov.GPUs, api.GPUView{Worker: "node7", Index: 0, TotalBytes: 80 * gib, Slots: -1, Busy: 1, Utilization: -1, Temperature: -1,
		Jobs: []api.Holding{{Job: "gla.9", ReservedBytes: 10 * gib}}, WorkerAway: away})
	var buf bytes.Buffer
	if err := Print(&buf, ov, Options{}, 120); err != nil {
		t.Fatal(err)
	}
	want := "GPU node7:0 AWAY: not heard from since 15:03:55; gla.9 run again elsewhere unless it is back within 1m50s\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("top:\n%s\nwant the away card: %s", buf.String(), want)
	}
	// One the daemon has not heard from since it started (taken up from the state).
	away.Unheard = true
	buf.Reset()
	if err := Print(&buf, ov, Options{}, 120); err != nil {
		t.Fatal(err)
	}
	want = "GPU node7:0 AWAY: not heard from since the daemon started at 15:03:55; gla.9 run again elsewhere unless it is back within 1m50s\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("top:\n%s\nwant the away card: %s", buf.String(), want)
	}
}

// TestARunningHeldJobIsShownAndReleased: a running job that is held says so in its
// row, and h releases it, as it does a queued one (it held it again, each time saying
// it was held already, with nothing on screen to tell).
func TestARunningHeldJobIsShownAndReleased(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.ov.Running[1].Held = true // gla.2
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24})
	var row string
	for _, l := range strings.Split(m.screen(), "\n") {
		if strings.Contains(l, "gla.2 ") {
			row = l
			break
		}
	}
	if !strings.Contains(row, "held") {
		t.Errorf("gla.2's row does not say it is held: %q", row)
	}
	drive(t, m, keysOf("j", "h", "j", "h")...)
	if got := strings.Join(src.acts, "; "); got != "release gla.2; hold gla.3" {
		t.Errorf("requests %q, want release gla.2; hold gla.3", got)
	}
}

// TestLongTitlesKeepTheColumnsInLine: a list's title heads its job column, and one
// longer than the ids ("RUNNING 12", or "QUEUE 1 of 2" while a filter hides some)
// widens the column rather than push its headers right of their values.
func TestLongTitlesKeepTheColumnsInLine(t *testing.T) {
	ov := sampleOverview(t)
	for i := 4; len(ov.Running) < 12; i++ { // ids no wider than the column's 8 cells
		r := ov.Running[2]
		r.Job, r.Name = fmt.Sprintf("g.%d", i), fmt.Sprintf("cola,seed=%d", i)
		ov.Running = append(ov.Running, r)
	}
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 160, Height: 50})
	cell := func(s, sub string) int { return ansi.StringWidth(s[:max(0, strings.Index(s, sub))]) }
	for _, filter := range []string{"", "/rte"} {
		if filter != "" {
			m = drive(t, m, keysOf(filter, "enter")...)
		}
		lines := strings.Split(m.screen(), "\n")
		find := func(sub string) string {
			for _, l := range lines {
				if strings.Contains(l, sub) {
					return l
				}
			}
			return ""
		}
		if filter == "" {
			head, row := find("RUNNING 12 "), find("gla.1 ")
			if h, r := cell(head, "NAME"), cell(row, "qnli,seed=87"); h == 0 || h != r {
				t.Errorf("NAME at cell %d, the name at %d:\n%s\n%s", h, r, head, row)
			}
		}
		head, row := find("QUEUE "), find("gla.4 ")
		if h, r := cell(head, "STATE"), cell(row, "queued"); h == 0 || h != r {
			t.Errorf("filter %q: STATE at cell %d, the state at %d:\n%s\n%s", filter, h, r, head, row)
		}
	}
}

// TestTheLogFollowsTheJobToItsNextAttempt: a log shown with l is of the job, read anew
// each refresh: once it has run out of memory and started again, the view shows the new
// attempt's log (it stayed on the ended one's), and while the daemon does not say (it
// restarts), the one shown so far.
func TestTheLogFollowsTheJobToItsNextAttempt(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	dir := t.TempDir()
	first, second := filepath.Join(dir, "attempt-1.log"), filepath.Join(dir, "attempt-2.log")
	for p, text := range map[string]string{first: "torch.OutOfMemoryError: CUDA out of memory", second: "simtrain: gradient_checkpointing True"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src.logs = map[string]string{"gla.1": first}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = drive(t, m, keysOf("l")...)
	if !strings.Contains(m.screen(), "OutOfMemoryError") {
		t.Fatalf("the log view:\n%s", m.screen())
	}
	src.logs["gla.1"] = second // the job's next attempt
	m = drive(t, m, tickMsg{})
	if v := m.screen(); m.mode != reading || !strings.Contains(v, "gradient_checkpointing True") || m.logPath != second {
		t.Errorf("after the job started again, the log view:\n%s", v)
	}
	delete(src.logs, "gla.1") // the daemon does not answer
	m = drive(t, m, tickMsg{})
	if v := m.screen(); m.mode != reading || !strings.Contains(v, "gradient_checkpointing True") {
		t.Errorf("while the daemon did not say, the log view:\n%s", v)
	}
}

// TestAnAttemptThatEndsWhileAttachedIsToldSo: once gpuq attach returns, top says
// whether the trainer runs on or its attempt ended meanwhile (it said "detached" of
// both, and gpuq attach's own word was on the screen top had put back).
func TestAnAttemptThatEndsWhileAttachedIsToldSo(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.logs = map[string]string{"gla.2": src.ov.Running[0].Log}
	m := asciiModel(src)
	m.opts.Attach = func(string) *exec.Cmd { return exec.Command("true") }
	m = drive(t, m, m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24})
	m = drive(t, m, keysOf("j")...) // gla.2, attempt 1
	if _, cmd := m.Update(keysOf("a")[0]); cmd == nil {
		t.Fatal("a started no gpuq attach")
	}
	m = drive(t, m, attachedMsg{job: "gla.2", attempt: 1})
	if v := m.screen(); !strings.Contains(v, "detached from gla.2; it runs on") {
		t.Errorf("after a detach, the screen:\n%s", v)
	}
	src.ended = map[string]string{"gla.2": "gpu-oom"}
	m = drive(t, m, attachedMsg{job: "gla.2", attempt: 1})
	if v := m.screen(); !strings.Contains(v, "attempt 1 of gla.2 ended while attached: gpu-oom") || strings.Contains(v, "detached") {
		t.Errorf("after the attempt ended, the screen:\n%s", v)
	}
}

// TestTheSelectionStaysWithItsJob: a selected queued job that starts stays selected in
// the running list, and a running one that ends among the events, so that the next
// key acts on it (the selection went to the first row, and h held another job).
func TestTheSelectionStaysWithItsJob(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, keysOf("j", "j", "j")...) // gla.4, queued
	if got := m.selectedJob(); got != "gla.4" {
		t.Fatalf("selected %q, want gla.4", got)
	}
	ov := sampleOverview(t)
	ov.Running = append(ov.Running, api.RunningJob{Job: "gla.4", Name: "rte,seed=87", GPUs: []int{1}, Attempt: 1, Started: ov.Time})
	ov.Queue = ov.Queue[1:]
	src.ov = ov
	m = drive(t, m, overviewMsgOf(src))
	if got := m.selectedJob(); got != "gla.4" || !strings.HasPrefix(m.sel, "r/") {
		t.Errorf("once gla.4 started, selected %q (%s), want gla.4 among the running", got, m.sel)
	}
	ov.Running = ov.Running[:3]
	ov.Events = append(ov.Events, api.Event{Time: ov.Time, Job: "gla.4", Attempt: 1, Kind: "failed", Message: "attempt 1 failed: exited with status 1"})
	src.ov = ov
	m = drive(t, m, overviewMsgOf(src))
	drive(t, m, keysOf("r")...)
	if got := strings.Join(src.acts, "; "); got != "retry gla.4" {
		t.Errorf("once gla.4 failed, r sent %q, want retry gla.4", got)
	}
}

// TestABlockedJobIsToldBlocked: a job waiting for what it runs after is "blocked" in
// the queue, as gpuq status says (top said "queued"), its columns in line with the
// others'.
func TestABlockedJobIsToldBlocked(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.ov.Queue[0].State = "queued"
	src.ov.Queue = append(src.ov.Queue, api.WaitingJob{Job: "gla.6", Name: "mnli,seed=87", State: "blocked", EstimateBytes: 14 * gib,
		Reason: "runs after pretrain, which must succeed first; gpuq why gla.6 says how that stands"})
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 160, Height: 40})
	lines := map[string]string{}
	for _, l := range strings.Split(m.screen(), "\n") {
		for _, k := range []string{"QUEUE ", "gla.4 ", "gla.5 ", "gla.6 "} {
			if strings.Contains(l, k) {
				lines[k] = l
			}
		}
	}
	end := func(s, sub string) int { return ansi.StringWidth(s[:max(0, strings.Index(s, sub))]) + len(sub) }
	for k, state := range map[string]string{"gla.4 ": "queued", "gla.5 ": "held", "gla.6 ": "blocked"} {
		row := lines[k]
		if !strings.Contains(row, " "+state+" ") {
			t.Errorf("%sis not told %s: %q", k, state, row)
		}
		if h, r := end(lines["QUEUE "], "ESTIMATE"), end(row, "14.0G"); h != r {
			t.Errorf("ESTIMATE ends at cell %d, %sestimate at %d:\n%s\n%s", h, k, r, lines["QUEUE "], row)
		}
	}
}

// TestARequeuedJobSaysSo: a queued job that has run (and ran out of memory, say) says
// how its latest attempt ended and at what tier before why it waits, in the words of
// gpuq status's REASON where its line has room for them; on 80 columns in fewer (after
// gpu-oom at t0), so that why it waits still shows, and printed whole at any width. A
// filter finds it by them.
func TestARequeuedJobSaysSo(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	src.ov.Queue[0].Requeued = "requeued after gpu-oom at tier 0"
	m := drive(t, asciiModel(src), m0(src)...)
	rowOf := func(screen, job string) string {
		i := strings.Index(screen, " "+job+" ")
		row, _, _ := strings.Cut(screen[max(i, 0):], "\n")
		return row
	}
	for _, tc := range []struct {
		width int
		says  string
	}{
		{80, " 14.0G  after gpu-oom at t0 · no-memory: 14.00"},
		{160, " 14.0G  requeued after gpu-oom at tier 0 · no-memory: 14.00 GiB needed, 3.20 GiB free at most (GPU 1)"},
	} {
		m = drive(t, m, tea.WindowSizeMsg{Width: tc.width, Height: 24})
		if row := rowOf(m.screen(), "gla.4"); !strings.Contains(row, tc.says) {
			t.Errorf("at %d columns, gla.4 does not say it was requeued before why it waits, as %q: %q", tc.width, tc.says, row)
		}
		if row := rowOf(m.screen(), "gla.5"); !strings.Contains(row, " 14.0G  held: ") {
			t.Errorf("at %d columns, gla.5, which has not run, does not say why it waits alone: %q", tc.width, row)
		}
	}
	var buf bytes.Buffer
	if err := Print(&buf, src.ov, Options{}, 80); err != nil {
		t.Fatal(err)
	}
	if row := rowOf(buf.String(), "gla.4"); !strings.Contains(row, " 14.0G  requeued after gpu-oom at tier 0 · no-memory: ") {
		t.Errorf("printed at 80 columns, gla.4 is not in gpuq status's words: %q", row)
	}
	m = drive(t, m, keysOf("/requeued", "enter")...)
	if v := m.screen(); !strings.Contains(v, "QUEUE 1 of 2 ") || !strings.Contains(v, "gla.4 ") {
		t.Errorf("filtered by requeued, the queue does not show gla.4 alone:\n%s", v)
	}
}

// TestUtilSaysWhatStatusSays: a running job whose shape counts as the whole card for
// want of a measurement shows all? under UTIL, as gpuq status does, not 100%, which a
// shape measured busy shows; one not yet counted at all shows "-".
func TestUtilSaysWhatStatusSays(t *testing.T) {
	ov := sampleOverview(t)
	whole := 1.0
	ov.Running[1].Util, ov.Running[1].UtilUnmeasured = &whole, true
	ov.Running[2].Util = &whole
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24})
	for _, want := range []struct{ name, util string }{{"qnli,seed=87", "45%"}, {"sst2,seed=87", "all?"}, {"cola,seed=87", "100%"}} {
		i := strings.Index(m.screen(), want.name)
		line, _, _ := strings.Cut(m.screen()[max(i, 0):], "\n")
		if i < 0 || !slices.Contains(strings.Fields(line), want.util) {
			t.Errorf("%s: UTIL is not %s: %q", want.name, want.util, line)
		}
	}
}

// TestATinyScreenKeepsItsTitle: a screen with too few rows for the cards, a line of the
// lists and the keys keeps its title on its first line and says it is too small, in
// no more lines than it has; with enough rows, the title heads the cards.
func TestATinyScreenKeepsItsTitle(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)} // 4 cards: 1 + 4 + 2 + 1 rows
	m := drive(t, asciiModel(src), m0(src)...)
	for _, tc := range []struct {
		height int
		small  bool
	}{{1, true}, {3, true}, {7, true}, {8, false}, {9, false}} {
		m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: tc.height})
		lines := strings.Split(m.screen(), "\n")
		if len(lines) != tc.height || !strings.HasPrefix(lines[0], "gpuq top · ") {
			t.Errorf("80x%d: %d lines, the first %q", tc.height, len(lines), lines[0])
			continue
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > 80 {
				t.Errorf("80x%d: line %d is %d wide: %q", tc.height, i+1, w, l)
			}
		}
		if small := strings.Contains(m.screen(), "too small"); tc.height > 1 && (small != tc.small || small && !strings.Contains(lines[1], "needs 8 rows")) {
			t.Errorf("80x%d: said too small %v, want %v:\n%s", tc.height, small, tc.small, m.screen())
		}
	}
}

// TestCutName: a point (or a job's name) too long for its column loses the keys of its text values, as
// a job's name does, then its other keys' ends, the longest first, before any value;
// then its text values' starts (not a size's), then its keys; then its middle. The
// jobs of a sweep keep names told apart down to where only its middle is left to cut.
func TestCutName(t *testing.T) {
	for _, tt := range []struct {
		point string
		width int
		want  string
	}{
		{"task=sst2,learning_rate=1e-3", 40, "task=sst2,learning_rate=1e-3"},
		{"task=sst2,learning_rate=1e-3", 22, "sst2,learning_ra…=1e-3"},
		{"task=sst2,learning_rate=1e-3", 12, "sst2,l…=1e-3"},
		{"task=rte,learning_rate=1e-3,sim_activations=26GiB", 34, "task=rte,learning_rate=1e-3,26GiB"},
		{"task=rte,learning_rate=1e-3,sim_activations=26GiB", 22, "rte,learni…=1e-3,26GiB"},
		{"learning_rate=1e-3,seed", 12, "l…=1e-3,seed"},
		{"task=glue-tvt_qnli,lr=3e-4", 14, "…_qnli,lr=3e-4"},
		{"glue-tvt_qnli,lr=3e-4,seed=87", 19, "…qnli,lr=3e-4,s…=87"},
		{"glue-tvt_qnli,lr=1e-4,seed=87", 19, "…qnli,lr=1e-4,s…=87"},
		{"glue-tvt_qnli,lr=3e-4,seed=87", 26, "…ue-tvt_qnli,lr=3e-4,s…=87"},
		{"glue-tvt_qnli,lr=3e-4,seed=87", 15, "…nli,lr=3e-4,87"},
		{"glue-tvt_qnli,lr=3e-4,seed=87", 12, "…nli,3e-4,87"},
		{"task=rte,learning_rate=1e-3,sim_activations=26GiB", 16, "rte,1e-3,26GiB"},
		{"glue-tvt_qnli,lr=3e-4,seed=87", 10, "…nli,…4,87"},
	} {
		if got := CutName(tt.point, tt.width); got != tt.want {
			t.Errorf("CutName(%q, %d) = %q, want %q", tt.point, tt.width, got, tt.want)
		}
	}
	var names []string
	for _, task := range []string{"glue-tvt_qnli", "glue-tvt_sst2"} {
		for _, lr := range []string{"1e-4", "3e-4"} {
			for _, seed := range []string{"87", "88"} {
				names = append(names, task+",lr="+lr+",seed="+seed)
			}
		}
	}
	for width := 12; width <= 29; width++ {
		seen := map[string]string{}
		for _, n := range names {
			c := CutName(n, width)
			if prev, dup := seen[c]; dup || ansi.StringWidth(c) > width {
				t.Errorf("at %d cells %s is %q, as %s is", width, n, c, prev)
			}
			seen[c] = n
		}
	}
}

// TestCutsCountWideCharacters: a value of wide characters (日本語, two cells each)
// cut to its end keeps what fits in the cells it is given, not a character more,
// so that a name keeps its keys where an ASCII one of its width does (lr=3e-4, not
// "…=3e-4" beside rows that say lr) and never runs past its column.
func TestCutsCountWideCharacters(t *testing.T) {
	const task = "日本語の感情分析タスク"
	if got := CutName("task="+task+",lr=3e-4", 12); got != "…ク,lr=3e-4" {
		t.Errorf("CutName = %q, want …ク,lr=3e-4 (the end of the task in the cells left, the key kept)", got)
	}
	for width := 4; width <= 24; width++ {
		for _, got := range []string{CutName("task="+task+",lr=3e-4", width), CutStart(task+".12", width), cutMiddle(task, width)} {
			if ansi.StringWidth(got) > width {
				t.Errorf("cut to %d cells, %q takes %d", width, got, ansi.StringWidth(got))
			}
		}
	}
}

// TestIDsGiveWayBeforeNames: at 80 columns a sweep's long ids lose their start, down
// to MinCut cells, before its names lose more than their keys, as gpuq status's and
// run's tables cut them: the ids share the sweep's name, the names tell the jobs apart.
func TestIDsGiveWayBeforeNames(t *testing.T) {
	ov := sampleOverview(t)
	ov.Running[1].Job, ov.Running[1].Name = "glue-run-with-long-names.12", "glue-sst2,learning_rate=1e-4"
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	v := m.screen()
	if !strings.Contains(v, " …ng-names.12 glue-sst2,l…=1e-4 ") {
		t.Errorf("at 80 columns, want the id cut to %d cells and the name's values whole:\n%s", MinCut, v)
	}
}

// TestEventsFollowTheNewestOnceTheSelectedJobEnds: a running job selected that ends
// takes the selection to its event; as newer events come, the list keeps showing the
// newest, not "… N above" and the old event; selected by a key, an event stays.
func TestEventsFollowTheNewestOnceTheSelectedJobEnds(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, keysOf("j")...) // gla.2, running
	ov := sampleOverview(t)
	ov.Running = slices.Delete(ov.Running, 1, 2)
	ov.Events = append(ov.Events, api.Event{Time: ov.Time, Job: "gla.2", Attempt: 1, Kind: "cancelled", Message: "exited with status 143"})
	src.ov = ov
	m = drive(t, m, overviewMsgOf(src))
	if !strings.HasPrefix(m.sel, "e/gla.2/") {
		t.Fatalf("once gla.2 ended, selected %s, want its event", m.sel)
	}
	for i := range 12 {
		ov.Events = append(ov.Events, api.Event{Time: ov.Time.Add(time.Duration(i+1) * time.Second), Job: fmt.Sprintf("new.%d", i),
			Attempt: 1, Kind: "succeeded", Message: "exited with status 0"})
	}
	src.ov = ov
	m = drive(t, m, overviewMsgOf(src))
	v := m.screen()
	if strings.Contains(v, "above") || !strings.Contains(v, "new.11 #1 succeeded") || strings.Contains(v, ">") && strings.Contains(v, "gla.2 #1 cancelled") {
		t.Errorf("newer events came: want the newest shown, not gla.2's event:\n%s", v)
	}
	// An event the person selects stays selected, however many come after it.
	m = drive(t, m, keysOf("j", "j", "j", "j", "j", "j")...)
	sel := m.sel
	ov.Events = append(ov.Events, api.Event{Time: ov.Time.Add(time.Minute), Job: "new.12", Attempt: 1, Kind: "succeeded"},
		api.Event{Time: ov.Time.Add(time.Minute), Job: "new.13", Attempt: 1, Kind: "succeeded"})
	src.ov = ov
	if m = drive(t, m, overviewMsgOf(src)); m.sel != sel || !strings.HasPrefix(sel, "e/") {
		t.Errorf("an event selected by a key: %s, then %s", sel, m.sel)
	}
}

// TestCutNamesTellApart: names of one column that CutName cuts alike (glue-tvt_qnli and
// glue-tvt_wnli both …nli) are cut so that each reads as itself, at every width down
// to where they cannot be, and there as CutName cuts them; names it tells apart
// already are cut as it cuts them, and identical names stay identical. gpuq status's,
// run's and top's columns of names are all cut by CutNames.
func TestCutNamesTellApart(t *testing.T) {
	var names []string
	for _, task := range []string{"glue-tvt_qnli", "glue-tvt_wnli", "glue-tvt_sst2"} {
		for _, seed := range []string{"87", "88"} {
			names = append(names, task+",lr=3e-4,seed="+seed)
		}
	}
	names = append(names, names[0]) // the same point twice
	for width := 4; width <= 30; width++ {
		got := CutNames(names, width)
		seen := map[string]string{}
		for i, n := range names {
			c := got[i]
			if w := ansi.StringWidth(c); w > width {
				t.Errorf("at %d cells %s is %q, %d wide", width, n, c, w)
			}
			if prev, dup := seen[c]; dup && prev != n {
				t.Errorf("at %d cells %s and %s are both %q", width, prev, n, c)
			}
			seen[c] = n
			// Names told apart already are cut as the column is, not each as CutName
			// would cut it alone: they keep their keys where the others do.
			if strings.Count(c, "=") != strings.Count(got[0], "=") {
				t.Errorf("at %d cells %s is %q, beside %q", width, n, c, got[0])
			}
		}
		if got[len(names)-1] != got[0] {
			t.Errorf("at %d cells the same name is cut as %q and %q", width, got[0], got[len(names)-1])
		}
	}
	for _, tt := range []struct {
		names []string
		width int
		want  []string
	}{
		// The task keeps its fourth cell from its end, the point its values; the keys
		// gone, the task takes back the room they leave.
		{[]string{"glue-tvt_qnli,lr=3e-4,seed=87", "glue-tvt_wnli,lr=3e-4,seed=87"}, 13, []string{"…qnli,3e-4,87", "…wnli,3e-4,87"}},
		{[]string{"glue-tvt_qnli,lr=3e-4,seed=87", "glue-tvt_wnli,lr=3e-4,seed=87"}, 15, []string{"…t_qnli,3e-4,87", "…t_wnli,3e-4,87"}},
		// They differ in a middle that a cut takes: each around where they differ.
		{[]string{"run-a-very-long-prefix-1-then-a-common-end", "run-a-very-long-prefix-2-then-a-common-end"}, 12, []string{"…fix-1-then…", "…fix-2-then…"}},
		// Too narrow for the task's end and the seed: the start of either.
		{[]string{"glue-tvt_qnli,lr=3e-4,seed=87", "glue-tvt_qnli,lr=3e-4,seed=88", "glue-tvt_wnli,lr=3e-4,seed=87", "glue-tvt_wnli,lr=3e-4,seed=88"},
			4, []string{"…q…7", "…q…8", "…w…7", "…w…8"}},
		// Every name of a column by the same stages, as gpuq results cuts its points:
		// where one must lose its keys, the others lose theirs too (sst2,1 beside rte,1,
		// not rte,s…=1, though that fits 8 cells); a key cut in one is cut alike in the
		// others (seed is s…= in every row or none); a column that fits stays whole.
		{[]string{"sst2,seed=1", "rte,seed=1"}, 8, []string{"sst2,1", "rte,1"}},
		{[]string{"sst2,seed=1", "rte,seed=1"}, 11, []string{"sst2,seed=1", "rte,seed=1"}},
		{[]string{"sst2,seed=1", "rte,seed=1"}, 9, []string{"sst2,s…=1", "rte,s…=1"}},
		{[]string{"learning_rate=1e-5,seed=1", "lr=1e-4,seed=2"}, 12, []string{"l…=1e-5,s…=1", "lr=1e-4,s…=2"}},
		{[]string{"learning_rate=1e-5,seed=1", "lr=1e-4,seed=2"}, 8, []string{"1e-5,1", "1e-4,2"}},
		{[]string{"glue-tvt_qnli,seed=87", "rte,seed=87"}, 11, []string{"…qnli,s…=87", "rte,s…=87"}},
	} {
		if got := CutNames(tt.names, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("CutNames(%q, %d) = %q, want %q", tt.names, tt.width, got, tt.want)
		}
	}
	// Too narrow for the task's end, the rate and the seed at once: cut as CutName cuts
	// them, not into text that tells no more.
	var three []string
	for _, task := range []string{"glue-tvt_qnli", "glue-tvt_wnli"} {
		for _, lr := range []string{"1e-4", "3e-4"} {
			for _, seed := range []string{"87", "88"} {
				three = append(three, task+",lr="+lr+",seed="+seed)
			}
		}
	}
	for i, c := range CutNames(three, 12) {
		if c != CutName(three[i], 12) {
			t.Errorf("at 12 cells %s is %q, not %q", three[i], c, CutName(three[i], 12))
		}
	}
}

// TestNamesCutAlikeAreToldApart: two jobs whose names differ only in their tasks'
// starts (glue-tvt_qnli, glue-tvt_wnli) read differently in the running list and the
// queue, where a cut to …nli showed them as one.
func TestNamesCutAlikeAreToldApart(t *testing.T) {
	ov := sampleOverview(t)
	ov.Running[0].Name, ov.Running[1].Name = "glue-tvt_qnli,lr=3e-4,seed=87", "glue-tvt_wnli,lr=3e-4,seed=87"
	ov.Queue[0].Name, ov.Queue[1].Name = "glue-tvt_qnli,lr=1e-4,seed=87", "glue-tvt_wnli,lr=1e-4,seed=87"
	src := &fakeSource{ov: ov}
	m := drive(t, asciiModel(src), m0(src)...)
	for _, width := range []int{60, 80} {
		m = drive(t, m, tea.WindowSizeMsg{Width: width, Height: 24})
		v := m.screen()
		names := map[string]string{}
		for _, l := range strings.Split(v, "\n") {
			if f := strings.Fields(strings.TrimPrefix(l, ">")); len(f) > 1 && strings.HasPrefix(f[0], "gla.") {
				names[f[0]] = f[1]
			}
		}
		if len(names) != 5 || names["gla.1"] == names["gla.2"] || names["gla.4"] == names["gla.5"] {
			t.Errorf("at %d columns the jobs' names %q:\n%s", width, names, v)
		}
	}
}

// TestTheCursorIsWhereOneTypes: the screen is full-screen, with the terminal's own
// cursor, steady, after what is typed in the footer while a line is typed, and none
// otherwise: at the cell it is at in the line as shown, scrolled or not, wide
// characters counted as two; what is pasted there goes into the line, and is no keys
// elsewhere. The keypad's Enter ends the line as Enter does.
func TestTheCursorIsWhereOneTypes(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	m := drive(t, asciiModel(src), m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 30, Height: 24})
	if v := m.View(); !v.AltScreen || v.Cursor != nil {
		t.Errorf("browsing: alt screen %v, cursor %+v; want the alt screen and no cursor", v.AltScreen, v.Cursor)
	}
	left := tea.KeyPressMsg{Code: tea.KeyLeft}
	for _, tc := range []struct {
		typed []tea.Msg
		line  string // the footer
		x     int    // the cursor's cell in it
	}{
		{append(keysOf("/", "rte"), tea.PasteMsg{Content: ",s"}), "/rte,s", 6},
		{keysOf("/", "日本語x"), "/日本語x", 8},
		// 36 typed in 30 cells: the end in view and a cell for the cursor past it; five
		// back, the same cells, the cursor among them; thirty back, the start.
		{keysOf("/", "abcdefghijklmnopqrstuvwxyz0123456789"), "/ijklmnopqrstuvwxyz0123456789", 29},
		{append(keysOf("/", "abcdefghijklmnopqrstuvwxyz0123456789"), left, left, left, left, left), "/ijklmnopqrstuvwxyz0123456789", 24},
		{append(keysOf("/", "abcdefghijklmnopqrstuvwxyz0123456789"), slices.Repeat([]tea.Msg{left}, 30)...), "/abcdefghijklmnopqrstuvwxyz01", 7},
		// Ten back, a third of the room (nine cells) kept for what follows the cursor.
		{append(keysOf("/", "abcdefghijklmnopqrstuvwxyz0123456789"), slices.Repeat([]tea.Msg{left}, 10)...), "/hijklmnopqrstuvwxyz012345678", 20},
	} {
		typed := drive(t, m, tc.typed...)
		v, screen := typed.View(), typed.screen()
		footer := screen[strings.LastIndex(screen, "\n")+1:]
		if footer != tc.line || v.Cursor == nil || v.Cursor.Blink || v.Cursor.Y != 23 || v.Cursor.X != tc.x {
			t.Errorf("the footer %q, cursor %+v; want %q, the cursor steady at cell %d of line 23", footer, v.Cursor, tc.line, tc.x)
		}
	}
	m = drive(t, m, keysOf("/", "rte")...)
	if m = drive(t, m, tea.KeyPressMsg{Code: tea.KeyKpEnter}); m.mode != browsing || m.filter.Value() != "rte" {
		t.Errorf("after the keypad's Enter: mode %v, filter %q; want browsing by rte", m.mode, m.filter.Value())
	}
	m = drive(t, m, keysOf("esc")...)
	next, cmd := m.Update(tea.PasteMsg{Content: "jjq"})
	if next.(model).sel != m.sel || cmd != nil {
		t.Errorf("a paste while browsing moved the selection, or did something")
	}
}

// TestAPromptStaysInView: a prompt open on a terminal too small for top's view (too few
// rows for the cards, or too narrow for the line) keeps the last line, with what is
// typed and the keys it takes in view: a cancel's y, a card's name, a filter's end;
// and so does what came of it. Top's view hid them, and keys went where nobody saw.
func TestAPromptStaysInView(t *testing.T) {
	last := func(m model) string {
		lines := strings.Split(m.screen(), "\n")
		if len(lines) != m.height {
			t.Errorf("%dx%d: %d lines", m.width, m.height, len(lines))
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > m.width {
				t.Errorf("%dx%d: line %d is %d wide: %q", m.width, m.height, i+1, w, l)
			}
		}
		return strings.TrimRight(lines[len(lines)-1], " ")
	}
	for _, tc := range []struct {
		width, height int
		keys          []string
		want          string // the last line's end
	}{
		{80, 5, []string{"c"}, "cancel gla.1? a running trainer is stopped (y/n)"},
		{80, 1, []string{"c"}, "cancel gla.1? a running trainer is stopped (y/n)"},
		{30, 24, []string{"c"}, "cancel gla.1? (y/n)"},
		{16, 3, []string{"c"}, "cancel …1? (y/n)"},
		{80, 5, []string{"c", "y"}, "gla.1: cancelled"},
		{80, 5, []string{"d", "gpu-node-12:3"}, "drain or undrain GPU: gpu-node-12:3"},
		{30, 5, []string{"d", "gpu-node-12:3"}, "(un)drain GPU: gpu-node-12:3"},
		{20, 2, []string{"/", "glue-tvt_qnli,learning_rate"}, "qnli,learning_rate"},
	} {
		src := &fakeSource{ov: sampleOverview(t)}
		m := drive(t, asciiModel(src), m0(src)...)
		m = drive(t, m, tea.WindowSizeMsg{Width: tc.width, Height: tc.height})
		m = drive(t, m, keysOf(tc.keys...)...)
		if got := last(m); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%dx%d after %q: the last line is %q, want it to end %q:\n%s", tc.width, tc.height, tc.keys, got, tc.want, m.screen())
		}
	}
}

// TestValuesWidthAndEndsWidth: ValuesWidth is the width at which CutName has cut a
// name's keys and no value yet; EndsWidth the width at which it has cut its keys and
// its text values down to their ends (…nli), and no number yet.
func TestValuesWidthAndEndsWidth(t *testing.T) {
	for _, tt := range []struct {
		of         string
		at         func(string) int
		name, want string // CutName's cut of name at at(name)
	}{
		{"ValuesWidth", ValuesWidth, "glue-tvt_qnli,seed=87", "glue-tvt_qnli,s…=87"},
		{"ValuesWidth", ValuesWidth, "task=sst2,learning_rate=1e-4", "sst2,l…=1e-4"},
		{"ValuesWidth", ValuesWidth, "task=rte,learning_rate=1e-3,sim_activations=26GiB", "rte,l…=1e-3,26GiB"},
		{"ValuesWidth", ValuesWidth, "learning_rate=1e-3,seed", "l…=1e-3,seed"},
		{"ValuesWidth", ValuesWidth, "sst2,seed=1", "sst2,s…=1"},
		{"ValuesWidth", ValuesWidth, "task=rte,lr=1e-3", "rte,lr=1e-3"},
		{"ValuesWidth", ValuesWidth, "sst2", "sst2"},
		{"EndsWidth", EndsWidth, "glue-tvt_qnli,seed=87", "…nli,s…=87"},
		{"EndsWidth", EndsWidth, "glue-tvt_qnli,seed=87,lr=0.0003", "…nli,s…=87,lr=0.0003"},
		{"EndsWidth", EndsWidth, "task=sst2,learning_rate=1e-4", "sst2,l…=1e-4"},
		{"EndsWidth", EndsWidth, "task=rte,learning_rate=1e-3,sim_activations=26GiB", "rte,l…=1e-3,26GiB"},
		{"EndsWidth", EndsWidth, "learning_rate=1e-3,seed", "l…=1e-3,seed"},
		{"EndsWidth", EndsWidth, "sst2", "sst2"},
	} {
		w := tt.at(tt.name)
		if got := CutName(tt.name, w); got != tt.want || ansi.StringWidth(got) != w {
			t.Errorf("%s(%q) = %d, where CutName cuts it to %q; want %q", tt.of, tt.name, w, got, tt.want)
		}
	}
}

// BenchmarkCutNamesAlike cuts a column of 10,000 names that a cut reads alike (they
// differ only at their start): top cuts every queued job's name each time it draws,
// and a daemon may hold 100,000. Its time grows with the names, not their square.
func BenchmarkCutNamesAlike(b *testing.B) {
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("x%05dabc_glue_task_name", i)
	}
	for b.Loop() {
		CutNames(names, 12)
	}
}

// TestNamesCutOnceForTheSameList: top's lists cut their names once for a list and a
// width, however often they are drawn, and again when either changes.
func TestNamesCutOnceForTheSameList(t *testing.T) {
	c := &nameCuts{}
	names := []string{"glue-qnli", "glue-wnli"}
	first := c.of(names, 5)
	if again := c.of(slices.Clone(names), 5); &again[0] != &first[0] {
		t.Error("the same names at the same width were cut again")
	}
	if wider := c.of(names, 9); &wider[0] == &first[0] || wider[0] != "glue-qnli" {
		t.Errorf("at another width: %q, want them cut anew", wider)
	}
	if other := c.of([]string{"glue-rte"}, 9); len(other) != 1 || other[0] != "glue-rte" {
		t.Errorf("other names: %q, want them cut anew", other)
	}
}

// endedRun is a gpuq run of gla that has ended, in dir, and left its record (rec),
// unless rec is nil (killed): it ended a minute after sampleOverview's clock.
func endedRun(t *testing.T, dir string, rec *api.RunRecord) api.Run {
	t.Helper()
	run := api.Run{Sweep: "gla", PID: 4242, Socket: filepath.Join(dir, "gla.4242.sock")}
	if rec != nil {
		if err := run.WriteRecord(func(w io.Writer) error { return json.NewEncoder(w).Encode(rec) }); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// endedRecord is how gla's jobs ended: two succeeded (one after an OOM), one failed,
// one was cancelled, one stopped early.
func endedRecord(t *testing.T) *api.RunRecord {
	now := sampleOverview(t).Time
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }
	one := 1
	job := func(id, name, st, reason string, attempts ...api.AttemptSummary) api.Job {
		j := api.Job{Sweep: "gla", JobSummary: api.JobSummary{ID: id, Name: name, State: st, Reason: reason, Attempts: attempts}}
		if st == "failed" {
			j.ExitCode = &one
		}
		return j
	}
	return &api.RunRecord{Ended: at(1), Jobs: []api.Job{
		job("gla.1", "qnli,seed=87", "succeeded", "",
			api.AttemptSummary{N: 1, GPUs: []int{0}, Outcome: "gpu-oom", Started: at(-64), Ended: at(-63)},
			api.AttemptSummary{N: 2, GPUs: []int{0}, Tier: 1, Outcome: "success", EstimateBytes: 14 * gib, PeakBytes: 13 * gib, Started: at(-62), Ended: at(-2)}),
		job("gla.2", "sst2,seed=87", "failed", "attempt 1 failed: exited with status 1: ValueError: nan loss",
			api.AttemptSummary{N: 1, GPUs: []int{0}, Outcome: "failed", PeakBytes: 6 * gib, Started: at(-5), Ended: at(0)}),
		job("gla.3", "cola,seed=87", "succeeded", "",
			api.AttemptSummary{N: 1, GPUs: []int{1}, Outcome: "success", PeakBytes: 2 * gib, Started: at(-1), Ended: at(1)}),
		job("gla.4", "rte,seed=87", "cancelled", "cancelled by gpuq cancel"),
		job("gla.5", "rte,seed=88", "stopped", "stopped early: losing to sst2"),
	}, Events: []api.Event{ // as the run told them, oldest first
		{Time: at(-64), Job: "gla.1", Attempt: 1, Kind: "started", Message: "on GPU 0, tier 0, no estimate"},
		{Time: at(-63), Job: "gla.1", Attempt: 1, Kind: "gpu-oom"},
		{Time: at(-62), Job: "gla.1", Attempt: 2, Kind: "started", Message: "on GPU 0, tier 1, estimate 14.00 GiB"},
		{Time: at(-5), Job: "gla.2", Attempt: 1, Kind: "started", Message: "on GPU 0, tier 0, no estimate"},
		{Time: at(-2), Job: "gla.1", Attempt: 2, Kind: "succeeded"},
		{Time: at(-1), Job: "gla.3", Attempt: 1, Kind: "started", Message: "on GPU 1, tier 0, no estimate"},
		{Time: at(0), Job: "gla.2", Attempt: 1, Kind: "failed", Message: "attempt 1 failed: exited with status 1: ValueError: nan loss"},
		{Time: at(1), Job: "gla.3", Attempt: 1, Kind: "succeeded"},
	}}
}

// TestARunThatEndsShowsHowItsJobsEnded: when the gpuq run watched ends, top shows how
// each of its jobs ended, from the record the run left (its last reading had them
// running, with older progress), says in the line under the title that the run ended,
// when, and how its jobs did, marks the clock, and reads nothing more; the keys that
// would act on a job say that the run has ended, l still shows a log, q quits. The run
// is called a run, never a daemon.
func TestARunThatEndsShowsHowItsJobsEnded(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	run := endedRun(t, t.TempDir(), endedRecord(t))
	m := asciiModel(src)
	m.opts.Title, m.opts.Run = "gpuq run of gla (pid 4242)", &run
	m = drive(t, m, m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = drive(t, m, keysOf("j")...) // gla.2, running
	if v := m.screen(); !strings.Contains(v, ">gla.2") || !strings.Contains(v, "RUNNING 3") {
		t.Fatalf("before the run ends:\n%s", v)
	}

	src.err = api.RunEndedError{Run: run}
	next, cmd := m.Update(overviewMsgOf(src))
	m = next.(model)
	if cmd != nil {
		t.Error("top goes on reading a run that has ended")
	}
	screen := m.screen()
	lines := strings.Split(screen, "\n")
	if len(lines) != 24 {
		t.Errorf("%d lines, want 24", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i+1, w, l)
		}
	}
	for _, want := range []string{
		"ended 15:05:05",
		"the gpuq run of gla ended: 2 succeeded, 1 failed, 1 cancelled, 1 stopped early",
		// On 80 columns, the cards, tier and peak give way to how each job ended.
		"JOBS 5    NAME         STATE     TRIES ELAPSED  HOW IT ENDED",
		" gla.1    qnli,seed=87 succeeded     2   1h00m  success",
		">gla.2    sst2,seed=87 failed        1   5m00s  exited with status 1: ValueErro", // the selection stays with its job
		" gla.4    rte,seed=87  cancelled     -       -  cancelled by gpuq cancel",
		// The events are those the run kept in its record as it ended, newest first
		// as the live ones: its last ends among them.
		"EVENTS\n 15:05:05 gla.3 #1 succeeded\n 15:04:05 gla.2 #1 failed: attempt 1 failed: exited with status 1: ValueError",
		" 14:02:05 gla.1 #2 started: on GPU 0, tier 1, estimate 14.00 GiB\n 14:01:05 gla.1 #1 gpu-oom\n 14:00:05 gla.1 #1 started: on GPU 0, tier 0, no estimate",
		"↑↓ move  l logs  / filter  q quit",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("no %q in:\n%s", want, screen)
		}
	}
	// The last reading's events (gla.0's, a card's) are not the run's end.
	for _, gone := range []string{"RUNNING", "QUEUE", "GPU 0 ", "GPU 3", "gla.0", "daemon", "attach"} {
		if strings.Contains(screen, gone) {
			t.Errorf("%q still on the screen:\n%s", gone, screen)
		}
	}
	if strings.Contains(lines[0], "15:04:05") {
		t.Errorf("the clock of the last reading in the title: %q", lines[0])
	}
	schedtest.Golden(t, "ended-80x24.txt", screen)
	// A shorter screen keeps the newest events that fit.
	if short := drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 16}).screen(); !strings.Contains(short, "EVENTS\n 15:05:05 gla.3 #1 succeeded\n") ||
		strings.Contains(short, "14:00:05") {
		t.Errorf("on 16 rows:\n%s", short)
	}
	wide := drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24}).screen()
	for _, want := range []string{
		"the gpuq run of gla ended at 15:05:05: 2 succeeded, 1 failed, 1 cancelled, 1 stopped early · q quits",
		"JOBS 5    NAME         STATE     TRIES GPU  TIER ELAPSED    PEAK  HOW IT ENDED",
		" gla.1    qnli,seed=87 succeeded     2 0    t1     1h00m   13.0G  success",
		" gla.4    rte,seed=87  cancelled     - -    -          -       -  cancelled by gpuq cancel",
	} {
		if !strings.Contains(wide, want) {
			t.Errorf("no %q on 120 columns:\n%s", want, wide)
		}
	}

	// A reading already on its way when it ended changes nothing.
	src.err = nil
	m = drive(t, m, overviewMsgOf(src))
	if !strings.Contains(m.screen(), "JOBS 5") {
		t.Errorf("a late reading brought the run back:\n%s", m.screen())
	}
	m = drive(t, m, keysOf("c")...)
	if len(src.acts) != 0 || !strings.Contains(m.screen(), "the gpuq run of gla has ended: its jobs are as it left them") {
		t.Errorf("c after the run ended: requests %q; the screen:\n%s", src.acts, m.screen())
	}
	_, cmd = m.Update(keysOf("q")[0])
	if cmd == nil || fmt.Sprint(cmd()) != fmt.Sprint(tea.Quit()) {
		t.Error("q did not quit")
	}
}

// TestARunsEventsAreThoseItKept: the events of a run that ended are those it kept in
// its record, as it told them (an OOM's next tier, a card's fault: what the jobs'
// histories do not say); a record of a gpuq that kept none leaves the last reading's.
func TestARunsEventsAreThoseItKept(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	rec := endedRecord(t)
	rec.Events = []api.Event{
		{Time: rec.Ended.Add(-time.Minute), Job: "gla.1", Attempt: 1, Kind: "gpu-oom", Message: "tried to allocate 2.00 GiB; next: tier 1 (gradient_checkpointing=true)"},
		{Time: rec.Ended, Job: "GPU 1", Kind: "out-of-service", Message: "NVML: GPU is lost\x1b[2J"},
	}
	ended := func(rec *api.RunRecord) string {
		run := endedRun(t, t.TempDir(), rec)
		m := asciiModel(src)
		m.opts.Run = &run
		m = drive(t, m, m0(src)...)
		m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24})
		src.err = api.RunEndedError{Run: run}
		defer func() { src.err = nil }()
		return drive(t, m, overviewMsgOf(src)).screen()
	}
	v := ended(rec)
	for _, want := range []string{
		"EVENTS\n 15:05:05 GPU 1 out-of-service: NVML: GPU is lost\n",
		" 15:04:05 gla.1 #1 gpu-oom: tried to allocate 2.00 GiB; next: tier 1 (gradient_checkpointing=true)",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("no %q in:\n%s", want, v)
		}
	}
	if strings.Contains(v, "gla.0") || strings.Contains(v, "\x1b[2J") {
		t.Errorf("the last reading's events, or a control sequence of the record's, on the screen:\n%q", v)
	}
	rec.Events = nil // left by a gpuq that kept none
	if v := ended(rec); !strings.Contains(v, "gla.0") {
		t.Errorf("a record without events: the last reading's are gone:\n%s", v)
	}
}

// TestARunKilledIsSaidSo: a gpuq run that ended without leaving its record (killed)
// is said to have ended, not shown running on.
func TestARunKilledIsSaidSo(t *testing.T) {
	src := &fakeSource{ov: sampleOverview(t)}
	run := endedRun(t, t.TempDir(), nil)
	m := asciiModel(src)
	m.opts.Run = &run
	m = drive(t, m, m0(src)...)
	m = drive(t, m, tea.WindowSizeMsg{Width: 120, Height: 24})
	src.err = api.RunEndedError{Run: run}
	m = drive(t, m, overviewMsgOf(src))
	v := m.screen()
	if !strings.Contains(v, "the gpuq run of gla ended at") || !strings.Contains(v, "left no record of how its jobs ended") ||
		strings.Contains(v, "RUNNING") || !strings.Contains(v, "JOBS 0") {
		t.Errorf("the screen:\n%s", v)
	}
}

// TestARunThatEndedIsPrinted: printed (no terminal), a run that ended since top found
// it is printed as it ended.
func TestARunThatEndedIsPrinted(t *testing.T) {
	run := endedRun(t, t.TempDir(), endedRecord(t))
	var buf bytes.Buffer
	if ok, err := PrintEnded(&buf, errors.New("refused"), Options{}, 80); ok || err != nil || buf.Len() > 0 {
		t.Errorf("printed for another error: %v %v %q", ok, err, buf.String())
	}
	ok, err := PrintEnded(&buf, fmt.Errorf("overview: %w", api.RunEndedError{Run: run}), Options{Title: "gpuq run of gla (pid 4242)"}, 80)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, want := range []string{"ended 15:05:05", "2 succeeded, 1 failed, 1 cancelled", "JOBS 5", "gla.5 ", "stopped early: losing to sst2"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "\x1b[") {
		t.Errorf("escape codes in plain output:\n%q", buf.String())
	}
}
