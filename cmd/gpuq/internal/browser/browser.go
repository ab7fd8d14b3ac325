// Package browser drives a headless Chromium for tests: it loads a page, keeps what the
// page reports as errors and what it requests, evaluates expressions in it, and takes
// screenshots. It speaks the DevTools protocol over a pipe (--remote-debugging-pipe:
// JSON messages ended by NUL on file descriptors 3 and 4), so it opens no port and needs
// no library.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Find returns the path of Debian's chromium on the PATH.
func Find() (string, error) {
	p, err := exec.LookPath("chromium")
	if err != nil {
		return "", fmt.Errorf("no chromium on the PATH: install Debian's chromium package (apt-get install chromium)")
	}
	return p, nil
}

// Browser is a running headless Chromium.
type Browser struct {
	cmd     *exec.Cmd
	profile string
	stderr  *tail // what it said, for the error when it ends
	toIt    *os.File
	fromIt  *os.File
	done    chan struct{}

	mu      sync.Mutex
	next    int
	pending map[int]chan message
	pages   map[string]*Page // by session
	err     error            // why the connection ended
}

type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *protocolError  `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

type protocolError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Start starts Chromium headless, with a fresh profile of its own (removed by Close)
// and nothing that reaches the network by itself.
func Start(path string) (*Browser, error) {
	// Chromium binds unix sockets under its profile and TMPDIR: both go in a directory
	// of a short path, since a long TMPDIR would overflow a socket's 107 bytes.
	profileDir, err := os.MkdirTemp("/tmp", "gpuq-chromium-")
	if err != nil {
		return nil, err
	}
	toR, toW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(profileDir)
		return nil, err
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		toR.Close()
		toW.Close()
		os.RemoveAll(profileDir)
		return nil, err
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--font-render-hinting=none",
		"--user-data-dir="+profileDir, "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toR, fromW} // its fds 3 and 4
	said := &tail{}
	cmd.Stderr = said
	cmd.Env = append(os.Environ(), "TMPDIR="+profileDir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profileDir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	toR.Close()
	fromW.Close()
	b := &Browser{cmd: cmd, profile: profileDir, stderr: said, toIt: toW, fromIt: fromR, done: make(chan struct{}),
		pending: map[int]chan message{}, pages: map[string]*Page{}}
	go b.read()
	return b, nil
}

// Close ends the browser and waits for it.
func (b *Browser) Close() error {
	b.toIt.Close()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	err := b.cmd.Wait()
	b.fromIt.Close()
	os.RemoveAll(b.profile)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // it ends by a signal when its pipe closes early; nothing was lost
	}
	return err
}

// read dispatches Chromium's messages: answers to their callers, events to their pages.
func (b *Browser) read() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.fromIt, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			b.fail(fmt.Errorf("chromium closed its pipe (%w); it said: %s", err, b.stderr))
			return
		}
		var m message
		if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			b.fail(fmt.Errorf("chromium sent %q: %w", raw, err))
			return
		}
		b.mu.Lock()
		if ch, ok := b.pending[m.ID]; ok && m.ID != 0 {
			delete(b.pending, m.ID)
			ch <- m
		} else if p := b.pages[m.SessionID]; p != nil {
			p.event(m)
		}
		b.mu.Unlock()
	}
}

func (b *Browser) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
	for id, ch := range b.pending {
		close(ch)
		delete(b.pending, id)
	}
}

// call sends a command (to a page's session, or to the browser with "") and decodes
// its result into out (nil: ignored).
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return b.err
	}
	b.next++
	id := b.next
	b.pending[id] = ch
	data, err := json.Marshal(message{ID: id, Method: method, Params: raw, SessionID: session})
	if err == nil {
		_, err = b.toIt.Write(append(data, 0))
	}
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, b.err)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out == nil {
			return nil
		}
		return json.Unmarshal(m.Result, out)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// tail keeps the last 4 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string

	mu       sync.Mutex
	loaded   chan struct{}
	errors   []string
	requests []string
}

// Open opens a tab of the given viewport size, loads url in it and waits for its load
// event.
func (b *Browser) Open(ctx context.Context, url string, width, height int) (*Page, error) {
	var target struct{ TargetID string }
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct{ SessionID string }
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: attached.SessionID, loaded: make(chan struct{}, 1)}
	b.mu.Lock()
	b.pages[p.session] = p
	b.mu.Unlock()
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable", "Network.enable"} {
		if err := b.call(ctx, p.session, m, struct{}{}, nil); err != nil {
			return nil, err
		}
	}
	if err := p.Resize(ctx, width, height); err != nil {
		return nil, err
	}
	var nav struct{ ErrorText string }
	if err := b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("load %s: %s", url, nav.ErrorText)
	}
	select {
	case <-p.loaded:
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("load %s: %w", url, ctx.Err())
	}
}

// event keeps what a page reports: errors of its console, scripts and loads, and the
// URLs it requests.
func (p *Page) event(m message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch m.Method {
	case "Page.loadEventFired":
		select {
		case p.loaded <- struct{}{}:
		default:
		}
	case "Runtime.exceptionThrown":
		var e struct {
			ExceptionDetails struct {
				Text      string
				Exception struct{ Description string }
			}
		}
		json.Unmarshal(m.Params, &e)
		p.errors = append(p.errors, strings.TrimSpace(e.ExceptionDetails.Text+" "+e.ExceptionDetails.Exception.Description))
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		json.Unmarshal(m.Params, &e)
		if e.Type == "error" || e.Type == "assert" {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, fmt.Sprint(a.Value)+a.Description)
			}
			p.errors = append(p.errors, "console."+e.Type+": "+strings.Join(parts, " "))
		}
	case "Log.entryAdded":
		var e struct {
			Entry struct{ Level, Text, URL string }
		}
		json.Unmarshal(m.Params, &e)
		if e.Entry.Level == "error" {
			p.errors = append(p.errors, strings.TrimSpace(e.Entry.Text+" "+e.Entry.URL))
		}
	case "Network.requestWillBeSent":
		var e struct{ Request struct{ URL string } }
		json.Unmarshal(m.Params, &e)
		p.requests = append(p.requests, e.Request.URL)
	}
}

// Errors returns what the page reported as errors so far: uncaught exceptions,
// console.error and console.assert, failed loads.
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// Requests returns the URLs the page requested so far, its own included.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Resize sets the viewport.
func (p *Page) Resize(ctx context.Context, width, height int) error {
	return p.b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
}

// Eval evaluates a JavaScript expression and decodes its value into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct{ Text string }
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate %s: %s", expr, r.ExceptionDetails.Text)
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Screenshot returns the page as PNG: the whole page, or the viewport alone.
func (p *Page) Screenshot(ctx context.Context, fullPage bool) ([]byte, error) {
	params := map[string]any{"format": "png"}
	if fullPage {
		var m struct {
			CSSContentSize struct{ Width, Height float64 }
		}
		if err := p.b.call(ctx, p.session, "Page.getLayoutMetrics", struct{}{}, &m); err != nil {
			return nil, err
		}
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}
	}
	var shot struct{ Data string }
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", params, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}
