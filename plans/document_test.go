package plans

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// aliasBomb is the billion laughs: levels of aliases, each ten of the one before, so
// that under 500 bytes expand to 10^(levels+1) values.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString(`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	return b.String()
}

// nested is a JSON or YAML flow list nested depth deep.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// Hostile documents are refused once a limit is reached, not decoded to the end: each
// of these took minutes and gigabytes, or overflowed the stack, when decoded whole.
func TestDecodeLimits(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		f    Format
		want string // "" = accepted
	}{
		{"YAML alias bomb of 8 levels", aliasBomb(8), YAML, "more than 1048576 values (YAML aliases expanded)"},
		{"YAML alias of itself", "a: &x [*x]\n", YAML, "nested deeper than 100 levels"},
		{"YAML nested 101 deep", "a: " + nested(100) + "\n", YAML, "line 1: nested deeper than 100 levels"},
		{"YAML nested 100 deep", "a: " + nested(99) + "\n", YAML, ""},
		{"YAML aliases that expand a little", "base: &b {lr: 0.1, wd: 0.01}\njobs: [{<<: *b, seed: 1}, {<<: *b, seed: 2}]\n", YAML, ""},
		{"JSON nested 200k deep", `{"matrix": ` + nested(200_000) + "}", JSON, "byte 110: nested deeper than 100 levels"},
		{"JSON nested 3M deep", nested(3_000_000), JSON, "nested deeper than 100 levels"},
		{"JSON nested 100 deep", `{"a": ` + nested(99) + "}", JSON, ""},
		{"JSON of too many values", "[" + strings.Repeat("1,", 1<<20) + "1]", JSON, "more than 1048576 values"},
		{"larger than a document may be", `{"a": "` + strings.Repeat("x", maxDocumentSize) + `"}`, JSON, "larger than the 8 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc), tt.f)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestReadDocument: a config.base is read within the limits of a sweep file, when the
// sweep is; one that cannot be is bad input, never a hung or crashed gpuq.
func TestReadDocument(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, maxDocumentSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "deep.json")
	if err := os.WriteFile(deep, []byte(nested(3_000_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{fifo, fifo + " is not a regular file"}, // without O_NONBLOCK, open waits for a writer
		{"/dev/zero", "/dev/zero is not a regular file"},
		{big, big + " is larger than the 8 MiB"},
		{deep, deep + ": not valid JSON: byte 100: nested deeper than 100 levels"},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
	} {
		doc := fmt.Sprintf("name: r\ncommand: [train]\njobs: [{}]\nconfig: {base: %q}\n", tt.path)
		if _, err := DecodeSweep(filepath.Join(dir, "s.yaml"), []byte(doc), Overrides{}); err == nil || !strings.Contains(err.Error(), "config.base: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("config.base %s: %v, want an error with %q", tt.path, err, tt.want)
		}
	}
}

// BenchmarkDecodeAliasBomb is the cost of refusing the 8-level alias file: decoding
// stops at maxValues.
func BenchmarkDecodeAliasBomb(b *testing.B) {
	doc := []byte(aliasBomb(8))
	for b.Loop() {
		if _, err := Decode(doc, YAML); err == nil {
			b.Fatal("accepted")
		}
	}
}

// TestSyntaxErrorLines: a YAML syntax error names the line an editor shows it on, the
// parser's as the scanner's (go-yaml counts the parser's from 0).
func TestSyntaxErrorLines(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"a list not closed", "name: x\n# c\n# c\n# c\ncommand: [python3, train.py\nmemory: 1GiB\n", "line 5: did not find expected ',' or ']'"},
		{"a key indented", "name: x\ncommand: [true]\nmemory: 1GiB\njobs: [{}]\n  bad: 1\n", "line 5: did not find expected key"},
		{"a mapping not closed", "name: x\ncommand: {a: 1\nmemory: 1GiB\n", "line 2: did not find expected ',' or '}'"},
		{"a list then a key", "- a\nb: 1\n", "line 2: did not find expected '-' indicator"},
		// The scanner's, counted from 1 already.
		{"no colon", "name: x\njobs: [{}]\nfoo bar\nbaz: 1\n", "line 3: could not find expected ':'"},
		{"a tab", "name: x\n\tcommand: [true]\n", "line 2: found a tab character"},
	} {
		_, err := Decode([]byte(tc.doc), YAML)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
