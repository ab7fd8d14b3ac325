package top

import (
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// logBytes is how much of a log's end the log view shows.
const logBytes = 64 << 10

// tailFile returns the last n bytes of a file, from a line's start, without the
// terminal's escape codes; carriage returns (tqdm redrawing its bar) keep the last
// drawing of each line.
func tailFile(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	from := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return "", err
	}
	text := string(buf)
	if from > 0 {
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	lines := strings.Split(ansi.Strip(text), "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n"), nil
}

// lastLine is the last line a trainer wrote that has something on it: its latest
// message or its progress bar; "" when its log cannot be read.
func lastLine(path string) string {
	if path == "" {
		return ""
	}
	text, err := tailFile(path, 4<<10)
	if err != nil {
		return ""
	}
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
