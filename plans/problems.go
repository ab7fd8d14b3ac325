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
// is near enough to be a likely slip of it (see closeTo), and "" otherwise: "boom" is
// not offered for "nope", which shares one letter of four with it.
func Suggest(word string, known []string) string {
	if best := Nearest(word, known); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// Nearest is the word of known that word is most likely a slip of (see closeTo), the
// fewest edits from it, the first in alphabetical order of those as few; "" where none
// is close. A word of known that is word itself is passed over: it is what was given.
// It is gpuq's one measure of "did you mean": every suggestion of another name, of a
// sweep, a key, a parameter or a command, is one of these (nearMiss, which asserts a
// typo rather than asks, holds a near word to a stricter bound besides).
func Nearest(word string, known []string) string {
	best, bestD := "", 0
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	for _, k := range sorted {
		if k == word {
			continue
		}
		if d, ok := closeTo(word, k); ok && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// closeTo says whether word is close enough to known to be a likely slip of it, and how
// many edits apart they are (letters put in, taken out, changed, or two beside each
// other swapped; case aside). Close is, as git and cobra judge it, few edits for the
// length of the word: one for a word of up to five letters, then one more for every
// three ("sed" for seed, "tsak" for task, "gla-1e" for gla-e1, "memroy" for memory),
// and never every letter of it ("a" is not a slip of "b"). A word that begins the
// other, of at least three letters and half of it, is close too: a name cut short
// ("qwen3-4" for qwen3-4b, "max_attempt" for max_attempts).
func closeTo(word, known string) (int, bool) {
	w, k := []rune(strings.ToLower(word)), []rune(strings.ToLower(known))
	d := distance(w, k, true)
	if d <= max(1, len(w)/3) && d < max(len(w), len(k)) {
		return d, true
	}
	prefix := len(w) >= 3 && 2*len(w) >= len(k) && len(w) < len(k) && slices.Equal(w, k[:len(w)])
	return d, prefix
}

// distance is the Levenshtein edit distance, and with swaps the optimal string
// alignment distance, in which two letters beside each other swapped ("taks" for task)
// are one edit, not two.
func distance(a, b []rune, swaps bool) int {
	// rows i-2, i-1 and i of the table of distances between a's and b's beginnings.
	prev2 := make([]int, len(b)+1)
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
			if swaps && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
