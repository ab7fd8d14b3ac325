package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestWords: text breaks at spaces, and a word too long for a line after a comma.
func TestWords(t *testing.T) {
	for _, tt := range []struct {
		text  string
		width int
		want  []string
	}{
		{"a bb ccc dddd", 8, []string{"a bb ccc", "dddd"}},
		{"q_proj,k_proj,v_proj,o_proj or all", 15, []string{"q_proj,k_proj,", "v_proj,o_proj", "or all"}},
		{"abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
	} {
		if got := words(tt.text, tt.width); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("words(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
}

// TestWrapHanging: a text wrapped under a lead and a longer indent for the lines that
// go on fits the width on every line, the indented ones too, and keeps every word.
func TestWrapHanging(t *testing.T) {
	text := "early-stop.10 stopped: stopped early at step 200: eval_loss 4.08, worse than 3 of the 5 points that reached it"
	for _, width := range []int{30, 40, 60, 61, 80} {
		got := wrapHanging("  ", "    ", text, width)
		fitsWidth(t, got, width)
		lines := strings.Split(got, "\n")
		if !strings.HasPrefix(lines[0], "  early-stop.10") || strings.Join(strings.Fields(got), " ") != text {
			t.Errorf("at %d cells:\n%s", width, got)
		}
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "     ") {
				t.Errorf("at %d cells, a line that goes on is not indented by 4: %q", width, l)
			}
		}
	}
	if got := wrapHanging("  ", "    ", text, 0); got != "  "+text {
		t.Errorf("piped: %q", got)
	}
}

// TestFirstOf: a message names at most ten jobs and says how many more there are.
func TestFirstOf(t *testing.T) {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("s.%d", i+1))
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{2, "s.1 s.2"},
		{10, "s.1 s.2 s.3 s.4 s.5 s.6 s.7 s.8 s.9 s.10"},
		{12, "s.1 s.2 s.3 s.4 s.5 s.6 s.7 s.8 s.9 s.10 ... and 2 more"},
	} {
		if got := firstOf(ids[:tc.n], " "); got != tc.want {
			t.Errorf("firstOf(%d ids) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestFitTableCutsNoMoreThanItMust: a table fitted to a terminal cuts its columns by no
// more than the line is too long. A last column that may be cut takes the room left, so
// where none is left it goes, and the two cells that would have parted it from the
// column before it are not taken from that column: a name that fits whole beside the
// others stays whole.
func TestFitTableCutsNoMoreThanItMust(t *testing.T) {
	table := "JOB\tNAME\tREASON\n" +
		"sweep-a.12\tglue-sst2,seed=87\tattempt 1 failed: exited with status 1\n"
	for _, tc := range []struct {
		width int
		want  string
	}{
		// The name (17 cells) fits whole beside the id (10) in 29 cells; the reason
		// has no room.
		{29, "JOB         NAME\nsweep-a.12  glue-sst2,seed=87\n"},
		{30, "JOB         NAME\nsweep-a.12  glue-sst2,seed=87\n"},
		// One cell too few: the name loses one, not three, from a key, not a value.
		{28, "JOB         NAME\nsweep-a.12  glue-sst2,se…=87\n"},
		// Room for the reason beside them: it is shortened to what is left.
		{43, "JOB         NAME               REASON\nsweep-a.12  glue-sst2,seed=87  attempt 1 f…\n"},
	} {
		var b strings.Builder
		tw := newFitTable(&b, tc.width, 1, 2).cutNames(1)
		fmt.Fprint(tw, table)
		tw.Flush()
		if b.String() != tc.want {
			t.Errorf("at %d cells:\n%s\nwant\n%s", tc.width, b.String(), tc.want)
		}
	}
}

// TestFitTableTellsNamesApart: names that a cut would make read alike (glue-tvt_qnli
// and glue-tvt_wnli both …nli) are cut as one column, each reading as itself.
func TestFitTableTellsNamesApart(t *testing.T) {
	table := "JOB\tNAME\tSTATE\n"
	for i, task := range []string{"qnli", "wnli", "qnli", "wnli"} {
		table += fmt.Sprintf("glue.%d\tglue-tvt_%s,lr=%de-4,seed=87\tsucceeded\n", i+1, task, 1+i/2*2)
	}
	for _, width := range []int{30, 40} {
		var b strings.Builder
		tw := newFitTable(&b, width, 1).cutNames(1)
		fmt.Fprint(tw, table)
		tw.Flush()
		fitsWidth(t, b.String(), width)
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
			if f := strings.Fields(l); len(f) != 3 || seen[f[1]] {
				t.Errorf("at %d cells, a name is cut as another's:\n%s", width, b.String())
				break
			} else {
				seen[f[1]] = true
			}
		}
	}
}
