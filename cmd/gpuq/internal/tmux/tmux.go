// Package tmux drives a program in a real terminal for tests, as a person at a keyboard
// would: it runs the program in a detached tmux session of a given size, types keys
// into it, and reads the screen back, as text or with its colours.
package tmux

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Session is a program running in a tmux window of its own.
type Session struct {
	t    testing.TB
	name string // the tmux server's socket name (-L), private to the session
}

var sessions atomic.Int64

// Start runs argv in a detached tmux session of width × height with env added to its
// environment; the session ends with the test. Without tmux the test is skipped,
// saying how to install it.
func Start(t testing.TB, width, height int, env []string, argv ...string) *Session {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux on the PATH: the terminal test is skipped (.ci/run installs it as root; apt-get install tmux)")
	}
	// -L, not -S: the socket goes under TMUX_TMPDIR or /tmp, short whatever TMPDIR is.
	s := &Session{t: t, name: fmt.Sprintf("gpuq-test-%d-%d", time.Now().UnixNano(), sessions.Add(1))}
	args := []string{"new-session", "-d", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height)}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	s.tmux(append(args, argv...)...)
	// The window keeps its size whatever clients attach, and stays to be read when the
	// program has ended.
	s.tmux("set-option", "-g", "window-size", "manual")
	s.tmux("set-option", "-g", "remain-on-exit", "on")
	t.Cleanup(func() { exec.Command("tmux", "-L", s.name, "kill-server").Run() })
	return s
}

func (s *Session) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.name, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Keys types keys, in tmux's names (Down, Enter, Escape, C-c) or as literal text.
func (s *Session) Keys(keys ...string) {
	s.t.Helper()
	s.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...)
}

// Screen is the screen as text, one line per row.
func (s *Session) Screen() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-t", "0")
}

// History is the screen and the lines scrolled off it, a line that wrapped at the
// terminal's edge joined again, so that its whole width shows.
func (s *Session) History() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "0")
}

// ScreenANSI is the screen with its colours and attributes as escape codes.
func (s *Session) ScreenANSI() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-e", "-t", "0")
}

// Resize makes the window width × height, as a person dragging its corner does: the
// program hears of it (SIGWINCH).
func (s *Session) Resize(width, height int) {
	s.t.Helper()
	s.tmux("resize-window", "-t", "0", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height))
}

// CursorShown reports whether the cursor shows, or a program has hidden it.
func (s *Session) CursorShown() bool {
	s.t.Helper()
	return strings.TrimSpace(s.tmux("display-message", "-p", "-t", "0", "#{cursor_flag}")) == "1"
}

// Exited reports whether the program has ended.
func (s *Session) Exited() bool {
	s.t.Helper()
	return strings.TrimSpace(s.tmux("display-message", "-p", "-t", "0", "#{pane_dead}")) == "1"
}

// WaitFor waits until the screen satisfies ok, and returns it; the test fails with
// the screen as it was if it does not within the timeout.
func (s *Session) WaitFor(what string, timeout time.Duration, ok func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		screen := s.Screen()
		if ok(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %s within %s; it shows:\n%s", what, timeout, screen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shows is a WaitFor condition: the screen holds every one of the texts.
func Shows(texts ...string) func(string) bool {
	return func(screen string) bool {
		for _, t := range texts {
			if !strings.Contains(screen, t) {
				return false
			}
		}
		return true
	}
}
