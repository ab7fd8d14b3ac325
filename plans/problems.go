package plans

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// FieldError is one thing wrong with a sweep: where it is and what to write instead.
type FieldError struct {
	File  string // the sweep file, or the flag / variable that supplied the value
	Field string // dotted path, e.g. "oom.ladder[1].scale"
	Job   string // the job at fault, where one is
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	switch e.Job {
	case "":
	case everyJob:
		b.WriteString(" (" + everyJob + ")")
	default:
		b.WriteString(" (job " + e.Job + ")")
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// everyJob stands for the job when a problem is the same in every job of the sweep.
const everyJob = "every job"

// Problems is every FieldError found in one sweep. Validation goes on after the first
// problem so that a user fixes a file in one pass, not one error per run.
type Problems []*FieldError

func (p Problems) Error() string {
	lines := make([]string, len(p))
	for i, e := range p {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// checker collects problems for one file.
type checker struct {
	file string
	dir  string // the sweep file's, which relative paths in it start from
	errs Problems
	// files are the contents of the files the sweep names, as read before (see
	// DecodeSweepFiles); read is every one read now, for the sweep to keep.
	files, read map[string]string
	// warns are what is allowed but probably not meant, each once.
	warns []string
	// submitted: the sweep is expanded again, as it was when it was submitted (see
	// ResubmitSweep), and what checks its jobs and sets nothing of them is left out.
	submitted bool
}

func (c *checker) warn(msg string) {
	if !slices.Contains(c.warns, msg) {
		c.warns = append(c.warns, msg)
	}
}

// read returns a file the sweep names: as it was read before, or from disk.
func (c *checker) readFile(path string) ([]byte, error) {
	data, ok := c.files[path]
	if !ok {
		b, err := ReadDocument(path)
		if err != nil {
			return nil, err
		}
		data = string(b)
	}
	if c.read == nil {
		c.read = map[string]string{}
	}
	c.read[path] = data
	return []byte(data), nil
}

func (c *checker) fail(field, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) failJob(field, job, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Field: field, Job: job, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs
}

// Count says n of a noun, in the singular for one: "1 job", "2 jobs", "3 entries".
func Count(n int, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "y"):
		noun = noun[:len(noun)-1] + "ies"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// Suggest returns ` (did you mean "x"?)` for the known word nearest to word, when one
// is near enough to be a likely typo, and "" otherwise.
func Suggest(word string, known []string) string {
	best, bestD := "", len(word)/2+2
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	for _, k := range sorted {
		if d := distance(strings.ToLower(word), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein edit distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
