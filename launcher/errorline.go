package launcher

// How a trainer ended, for people: its exit status or signal, and the line of its
// output that says why it failed, read once as the attempt ends (the supervisor keeps
// both in exit.json).

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/plans"
)

// ProcessExit is how the process ended, for people: its status or signal and, unless it
// succeeded or gpuq stopped it, the line of its output that says why it failed (see
// ErrorLine).
func ProcessExit(e Exit, tail []byte) *plans.ProcessExit {
	pe := &plans.ProcessExit{Code: e.Code}
	if e.Signal != 0 {
		pe.Code, pe.Signal = -1, cmp.Or(unix.SignalName(e.Signal), fmt.Sprintf("signal %d", int(e.Signal)))
	}
	if !e.Cancelled && (e.Code != 0 || e.Signal != 0) {
		pe.Error = ErrorLine(tail)
	}
	return pe
}

// ErrorLine is the line of an output that says why the process failed: the exception
// line of its last Python traceback; past a launcher's report that a worker failed
// (torchrun's ChildFailedError, a CalledProcessError), the worker's own traceback's.
// Where there is none, or it is cut off before its exception, the last of the last
// lines before it that says it is an error (see errorLike); else the last line that
// is not blank. A launcher's prefix ("[rank0]: ") is dropped, as are colours and what
// a carriage return overwrote; the line is cut to maxErrorLine bytes.
func ErrorLine(tail []byte) string {
	text := normalize(tail)
	end, report := len(text), ""
	for {
		i := bytes.LastIndex(text[:end], []byte(tracebackHeader))
		if i < 0 {
			break
		}
		start := lineStart(text, i)
		l := exceptionLine(text[start:end])
		end = start
		if l == "" {
			break // cut off before its exception: what came before says more
		}
		if !pointer().MatchString(l) {
			return cut(l, maxErrorLine)
		}
		if report == "" {
			report = l
		}
	}
	l := errorLike(text[:end])
	if l == "" {
		l = report
	}
	if l == "" {
		l = lastLine(text)
	}
	return cut(l, maxErrorLine)
}

// Lines that say they are errors: an exception's name ending a line or before a
// colon, as Python, C++ and Java print them, a module's class before a colon
// (triton.runtime.errors.OutOfResources: ...), or torchrun's report of the signal that
// killed a worker; or, weaker, a word that says something failed.
var (
	exceptionName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|[^\w.])[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b(?::|\s*$)|(?:^|\s)(?:[a-z_]\w*\.)+[A-Z]\w*: |\bSignal \d+ \(SIG[A-Z]+\)`)
	})
	failureWord = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:error|fatal|killed|aborted|segmentation fault|core dumped|failed)\b`)
	})
)

// errorLike is the last of text's last lines that an out-of-memory signature matches
// or that names an exception, else the last that says something failed; "" for none.
func errorLike(text []byte) string {
	lines := strings.Split(string(tail(text, lastLines)), "\n")
	weak := ""
	for i := len(lines) - 1; i >= 0; i-- {
		l := shown(lines[i])
		switch {
		case l == "":
		case lastMatch([]byte(l)) != nil, exceptionName().MatchString(l):
			return l
		case weak == "" && failureWord().MatchString(l):
			weak = l
		}
	}
	return weak
}

// maxErrorLine bounds an error line kept with every attempt: enough for an exception's
// type and its message's first sentences (PyTorch's OOM message runs to 600 bytes; its
// figures are in the OOM facts).
const maxErrorLine = 300

// exceptionLine is the exception line of the traceback tb begins with: after its last
// frame (a `File "..."` line, or the box rich draws around them), the first line that
// is not indented, less the prefix its header has; "" if the traceback is cut before
// it. Output of another process interleaved among the frames is passed over.
func exceptionLine(tb []byte) string {
	lines := strings.Split(string(tb), "\n")
	prefix, _, _ := strings.Cut(lines[0], tracebackHeader)
	if i := strings.IndexAny(prefix, boxCorners); i >= 0 {
		prefix = prefix[:i]
	}
	last := 1
	for i, l := range lines {
		l = strings.TrimPrefix(l, prefix)
		if strings.HasPrefix(strings.TrimSpace(l), `File "`) || strings.IndexAny(l, boxSides) == 0 {
			last = i
		}
	}
	for _, l := range lines[last:] {
		l = strings.TrimPrefix(l, prefix)
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l[:1], " \t") || strings.IndexAny(l, boxSides) == 0 {
			continue
		}
		return shown(l)
	}
	return ""
}

// The box rich draws around a traceback's frames: its corners, then what begins each
// line inside it and the line that closes it.
const (
	boxCorners = "╭┌"
	boxSides   = "│╰└"
)

// lastLine is the last line of text that is not blank, as a terminal shows it.
func lastLine(text []byte) string {
	lines := strings.Split(string(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := shown(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// shown is a line as a terminal leaves it: what follows its last carriage return
// (a progress bar's last state), trimmed.
func shown(l string) string {
	l = strings.TrimRight(l, "\r \t")
	if i := strings.LastIndexByte(l, '\r'); i >= 0 {
		l = l[i+1:]
	}
	return strings.TrimSpace(l)
}

// cut shortens s to at most n bytes, at a rune's start, marking the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
