// Package top is gpuq top: a live full-screen view of the daemon's cards and jobs, with
// keys to act on them, drawn with bubbletea, bubbles and lipgloss; and, where the output
// is no terminal, the same view printed once as plain text.
package top

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/lipgloss"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// Source is the daemon as top sees it: what of its client top uses.
type Source interface {
	Overview() (api.Overview, error)
	Act(v api.Verb, sel api.SelectRequest) ([]string, error)
	DrainCard(req api.DrainRequest) error
	Job(id string) (api.Job, error)
}

// Options configure top.
type Options struct {
	Source Source
	// Title says what is watched ("the daemon on ~/.local/state/gpuq").
	Title string
	// Every is how often the view is read again.
	Every time.Duration
	// Attach is the command that attaches the terminal to a job's trainer.
	Attach func(job string) *exec.Cmd
	// Sweep, where given, is the sweep whose jobs alone the lists show (the cards are
	// the machine's, and show every job on them).
	Sweep string
	// Run is the gpuq run watched; nil for the daemon. A run that ends does not come
	// back: top then shows how its jobs ended, and reads nothing more.
	Run *api.Run
	// StateDir is the state directory of the daemon watched, where top reads it on this
	// machine: a daemon that stops says so there (see api.Stopped); "" over the network.
	StateDir string
}

// Run shows top full-screen on a terminal until the user quits.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	m := newModel(opts, lipgloss.NewRenderer(out))
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	final, err := p.Run()
	if err != nil {
		return err
	}
	if fm, ok := final.(model); ok && fm.fatal != nil {
		return fm.fatal
	}
	return nil
}

// mode is what the keys do now.
type mode int

const (
	browsing mode = iota
	filtering
	confirming // a cancel waits for y
	draining   // the index of the card to drain is being typed
	reading    // a log is shown
)

type model struct {
	opts Options
	st   styles
	ov   api.Overview
	read bool  // an overview has arrived
	err  error // the last read's error, shown until one succeeds
	// stopped is the daemon that stopped, where the daemon does not answer (err) and
	// it said so as it stopped.
	stopped *stoppedDaemon
	ended   *runEnd           // the gpuq run watched has ended: how its jobs did
	fatal   error             // why top quit on its own
	output  map[string]string // each running job's last line of output
	width   int
	height  int

	mode mode
	sel  string // the selected row's key, kept across refreshes
	// trailing: top put the selection where it is (its job moved to another list,
	// or the first row), not a key: in EVENTS it lets go of a row the newest events
	// push out of the list's lines, which then keeps following them.
	trailing bool
	doomed   string // the job a cancel asks about
	filter   textinput.Model
	card     textinput.Model
	logs     viewport.Model
	logJob   string
	logPath  string
	status   string // the last action's result, shown until the next key
	// cuts keeps the names the lists were last cut to (see nameCuts).
	cuts *nameCuts
}

func newModel(opts Options, r *lipgloss.Renderer) model {
	if opts.Every <= 0 {
		opts.Every = time.Second
	}
	f := textinput.New()
	f.Prompt = "/"
	c := textinput.New()
	c.Prompt = drainPrompts[0]
	c.CharLimit = 140 // a worker's name (128 at most), a colon, an index
	for _, in := range []*textinput.Model{&f, &c} {
		// The terminal's own cursor, steady (see View): one drawn blinking redraws
		// the screen twice a second over ssh. top draws the line (see inputLine).
		in.SetVirtualCursor(false)
		st := in.Styles()
		st.Focused, st.Blurred, st.Cursor.Blink = textinput.StyleState{}, textinput.StyleState{}, false
		in.SetStyles(st)
	}
	// A log scrolls up and down alone: h and the arrows sideways moved its text.
	logs := viewport.New()
	logs.SetHorizontalStep(0)
	m := model{opts: opts, st: newStyles(r), filter: f, card: c, logs: logs, output: map[string]string{},
		width: 80, height: 24, cuts: &nameCuts{}}
	m.fitPrompts()
	return m
}

// drainPrompts ask for the card to drain, the shortest last: a narrow screen takes the
// first that leaves room to type a card's name.
var drainPrompts = []string{"drain or undrain GPU: ", "(un)drain GPU: ", "GPU: "}

// fitPrompts fits the card's prompt to the screen's width: a narrow screen takes the
// shortest that leaves room to type (what is typed scrolls within the line: see
// inputLine).
func (m *model) fitPrompts() {
	m.card.Prompt = drainPrompts[len(drainPrompts)-1]
	for _, p := range drainPrompts {
		if m.width-len(p) > 12 {
			m.card.Prompt = p
			break
		}
	}
}

// stoppedDaemon is a daemon that said, as it stopped, that it did: its pid, when it
// began to stop, and whether a person asked it to (gpuq daemon --stop).
type stoppedDaemon struct {
	pid   int
	at    time.Time
	asked bool
}

// Messages.
type (
	tickMsg     struct{}
	overviewMsg struct {
		ov     api.Overview
		output map[string]string
		err    error
		end    *runEnd        // err says that the run watched has ended
		gone   *stoppedDaemon // the daemon does not answer (err), and stopped
	}
	actedMsg struct {
		text string
		err  error
	}
	logMsg struct {
		job, path, text string
		err             error
	}
	// attachedMsg: gpuq attach of a job's attempt has returned, detached or ended.
	attachedMsg struct {
		job     string
		attempt int
	}
)

func (m model) Init() tea.Cmd { return m.fetch() }

// fetch reads the overview, and each running job's last line of output, off the
// screen's goroutine.
func (m model) fetch() tea.Cmd {
	src := m.opts.Source
	return func() tea.Msg {
		ov, err := src.Overview()
		ov = ofSweep(readable(ov), m.opts.Sweep)
		out := map[string]string{}
		for _, r := range ov.Running {
			out[r.Job] = lastLine(r.Log)
		}
		msg := overviewMsg{ov: ov, output: out, err: err, end: endOf(err)}
		if err != nil && api.Unanswered(err) && m.opts.Run == nil && m.opts.StateDir != "" {
			if pid, at, asked, ok := api.Stopped(m.opts.StateDir); ok {
				msg.gone = &stoppedDaemon{pid: pid, at: at, asked: asked}
			}
		}
		return msg
	}
}

func (m model) tick() tea.Cmd {
	return tea.Tick(m.opts.Every, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		// A log followed at its end stays followed: a shorter view would leave it
		// above its end, where the next reading no longer follows it.
		atEnd := m.logs.AtBottom()
		m.width, m.height = msg.Width, msg.Height
		m.logs.SetWidth(msg.Width)
		m.logs.SetHeight(max(msg.Height-2, 1))
		if atEnd {
			m.logs.GotoBottom()
		}
		m.fitPrompts()
		return m, nil
	case tickMsg:
		if m.ended != nil {
			return m, nil
		}
		cmds := []tea.Cmd{m.fetch()}
		if m.mode == reading {
			cmds = append(cmds, m.readLog(m.logJob, m.logPath))
		}
		return m, tea.Batch(cmds...)
	case overviewMsg:
		switch {
		case m.ended != nil:
			return m, nil
		case msg.end != nil:
			m.endRun(msg.end)
			return m, nil // no tick: the run does not come back
		case msg.err != nil:
			m.err, m.stopped = msg.err, msg.gone
		default:
			m.ov, m.output, m.err, m.stopped, m.read = msg.ov, msg.output, nil, nil, true
			m.keepSelection()
		}
		return m, m.tick()
	case actedMsg:
		text := msg.text
		if msg.err != nil {
			text = msg.err.Error()
		}
		m.status = text
		if m.ended != nil {
			return m, nil
		}
		return m, m.fetch()
	case attachedMsg:
		return m, m.afterAttach(msg.job, msg.attempt)
	case logMsg:
		if msg.err != nil {
			m.mode, m.status = browsing, msg.err.Error()
			return m, nil
		}
		atEnd := m.logs.AtBottom() || m.logJob != msg.job || m.logPath != msg.path
		m.logJob, m.logPath = msg.job, msg.path
		m.logs.SetContent(msg.text)
		if atEnd {
			m.logs.GotoBottom()
		}
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.PasteMsg:
		// Pasted into what is typed, never taken for keys.
		return m.paste(msg)
	}
	return m, nil
}

// say shows text in the footer until the next key.
func (m model) say(text string) (tea.Model, tea.Cmd) {
	m.status = text
	return m, nil
}

// paste puts what is pasted into the line being typed, if one is: elsewhere it is no
// keys to act on.
func (m model) paste(p tea.PasteMsg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch m.mode {
	case filtering:
		m.filter, cmd = m.filter.Update(p)
		m.keepSelection()
	case draining:
		m.card, cmd = m.card.Update(p)
	}
	return m, cmd
}

// key handles a key press in the current mode.
func (m model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	m.status = ""
	switch m.mode {
	case filtering:
		return m.filterKey(k)
	case draining:
		return m.drainKey(k)
	case confirming:
		m.mode = browsing
		if k.String() == "y" {
			return m, m.act(api.Cancel, m.doomed)
		}
		return m.say("not cancelled")
	case reading:
		if key.Matches(k, keys.back, keys.quit, keys.logs) {
			m.mode = browsing
			return m, nil
		}
		var cmd tea.Cmd
		m.logs, cmd = m.logs.Update(k)
		return m, cmd
	}
	return m.browseKey(k)
}

func (m model) browseKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	job := m.selectedJob()
	switch {
	case key.Matches(k, keys.quit):
		return m, tea.Quit
	case key.Matches(k, keys.up):
		m.move(-1)
	case key.Matches(k, keys.down):
		m.move(1)
	case key.Matches(k, keys.filter):
		m.mode = filtering
		return m, m.filter.Focus()
	case key.Matches(k, keys.back):
		m.filter.SetValue("")
		m.keepSelection()
	case m.ended != nil && key.Matches(k, keys.drain, keys.attach, keys.cancel, keys.hold, keys.retry):
		return m.say(fmt.Sprintf("the gpuq run of %s has ended: its jobs are as it left them (l shows a log; gpuq results %s, gpuq report %s)",
			m.ended.run.Sweep, m.ended.run.Sweep, m.ended.run.Sweep))
	case key.Matches(k, keys.drain):
		m.mode = draining
		m.card.SetValue("")
		return m, m.card.Focus()
	case job == "":
		if key.Matches(k, keys.logs, keys.attach, keys.cancel, keys.hold, keys.retry) {
			return m.say("select a job first (↑/↓)")
		}
	case key.Matches(k, keys.logs):
		m.mode = reading
		return m, m.readLog(job, "")
	case key.Matches(k, keys.attach):
		switch {
		case m.opts.Attach == nil:
			return m.say("attach is not available here")
		case !m.runs(job):
			// gpuq attach would refuse it, on a screen top hides while it runs.
			return m.say(fmt.Sprintf("%s is not running: only a running trainer's terminal can be attached (l shows a log)", job))
		}
		n := m.attemptOf(job)
		return m, tea.ExecProcess(m.opts.Attach(job), func(err error) tea.Msg {
			if err != nil {
				return actedMsg{err: err}
			}
			return attachedMsg{job: job, attempt: n}
		})
	case key.Matches(k, keys.cancel):
		m.mode, m.doomed = confirming, job
	case key.Matches(k, keys.hold):
		if m.held(job) {
			return m, m.act(api.Release, job)
		}
		return m, m.act(api.Hold, job)
	case key.Matches(k, keys.retry):
		return m, m.act(api.Retry, job)
	}
	return m, nil
}

func (m model) filterKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() { // by name: the keypad's Enter is "enter" too
	case "enter":
		m.mode = browsing
		m.filter.Blur()
		return m, nil
	case "esc":
		m.mode = browsing
		m.filter.Blur()
		m.filter.SetValue("")
		m.keepSelection()
		return m, nil
	}
	var cmd tea.Cmd
	m.filter, cmd = m.filter.Update(k)
	m.keepSelection()
	return m, cmd
}

func (m model) drainKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.mode = browsing
		m.card.Blur()
		return m, nil
	case "enter":
		m.mode = browsing
		m.card.Blur()
		id, err := plans.ParseCardID(strings.TrimSpace(m.card.Value()))
		c := m.cardOf(id)
		if err != nil || c == nil {
			return m.say(fmt.Sprintf("no GPU %q here", m.card.Value()))
		}
		on := !c.Drained
		src := m.opts.Source
		return m, func() tea.Msg {
			err := src.DrainCard(api.DrainRequest{Worker: id.Worker, GPU: id.Index, On: on})
			text := fmt.Sprintf("GPU %s drained: it takes no new job", id)
			if !on {
				text = fmt.Sprintf("GPU %s takes jobs again", id)
			}
			return actedMsg{text: text, err: err}
		}
	}
	var cmd tea.Cmd
	m.card, cmd = m.card.Update(k)
	return m, cmd
}

// act sends a verb for a job to the daemon.
func (m model) act(v api.Verb, job string) tea.Cmd {
	src := m.opts.Source
	return func() tea.Msg {
		_, err := src.Act(v, api.SelectRequest{IDs: []string{job}})
		return actedMsg{text: fmt.Sprintf("%s: %s", job, done[v]), err: err}
	}
}

var done = map[api.Verb]string{api.Cancel: "cancelled", api.Hold: "held", api.Release: "released", api.Retry: "queued again"}

// readLog reads the end of the log of a job's latest attempt, asked anew each time: a
// job that ran out of memory and started again is followed to its next attempt, as
// gpuq logs -f does. Where the daemon does not say (it restarts), the log shown so far
// (shown; "" for none) is read again.
func (m model) readLog(job, shown string) tea.Cmd {
	src := m.opts.Source
	return func() tea.Msg {
		path := shown
		j, err := src.Job(job)
		switch {
		case err == nil && len(j.Attempts) > 0:
			path = j.Attempts[len(j.Attempts)-1].Log
		case shown != "":
		case err != nil:
			return logMsg{err: err}
		default:
			return logMsg{err: fmt.Errorf("%s has not run yet: it has no log", job)}
		}
		text, err := tailFile(path, logBytes)
		return logMsg{job: job, path: path, text: text, err: err}
	}
}

// cardOf returns the card of an index, or nil.
func (m model) cardOf(id plans.CardID) *api.GPUView {
	for i := range m.ov.GPUs {
		if m.ov.GPUs[i].Worker == id.Worker && m.ov.GPUs[i].Index == id.Index {
			return &m.ov.GPUs[i]
		}
	}
	return nil
}

// afterAttach says how an attach of a job's attempt ended: detached, the trainer
// running on, or the attempt ended meanwhile, which gpuq attach said on the screen
// top has already put back.
func (m model) afterAttach(job string, n int) tea.Cmd {
	src := m.opts.Source
	return func() tea.Msg {
		j, err := src.Job(job)
		if err == nil && n > 0 && len(j.Attempts) >= n && j.Attempts[n-1].Outcome != "" {
			return actedMsg{text: fmt.Sprintf("attempt %d of %s ended while attached: %s (l shows its log)", n, job, j.Attempts[n-1].Outcome)}
		}
		return actedMsg{text: "detached from " + job + "; it runs on"}
	}
}

// attemptOf is the attempt a running job runs, 0 for none.
func (m model) attemptOf(job string) int {
	for _, r := range m.ov.Running {
		if r.Job == job {
			return r.Attempt
		}
	}
	return 0
}

// runs reports whether job is one of the running ones.
func (m model) runs(job string) bool {
	return slices.ContainsFunc(m.ov.Running, func(r api.RunningJob) bool { return r.Job == job })
}

// held reports whether job is held, queued or running: h releases it then.
func (m model) held(job string) bool {
	return slices.ContainsFunc(m.ov.Queue, func(q api.WaitingJob) bool { return q.Job == job && q.Held }) ||
		slices.ContainsFunc(m.ov.Running, func(r api.RunningJob) bool { return r.Job == job && r.Held })
}

// Keys.
type keyMap struct {
	up, down, logs, attach, cancel, hold, retry, drain, filter, back, quit key.Binding
}

var keys = keyMap{
	up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑↓", "move")),
	down:   key.NewBinding(key.WithKeys("down", "j")),
	logs:   key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "logs")),
	attach: key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "attach")),
	cancel: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "cancel")),
	hold:   key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "hold")),
	retry:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry")),
	drain:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "drain")),
	filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	back:   key.NewBinding(key.WithKeys("esc")),
	quit:   key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
}

func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.up, k.logs, k.attach, k.cancel, k.hold, k.retry, k.drain, k.filter, k.quit}
}

// endedHelp are the keys that do something once the run watched has ended.
func (k keyMap) endedHelp() []key.Binding { return []key.Binding{k.up, k.logs, k.filter, k.quit} }

func (k keyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }
