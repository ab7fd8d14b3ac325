package plans

import (
	"strings"
	"testing"
)

// TestAfterAndMaxRunning: what a sweep and its jobs run after, as read: a name or a
// list, added to by a job's own and by gpuq submit --after; refused when it is no
// name, names the sweep itself, or closes a cycle of its jobs. A max_running below 0
// is refused.
func TestAfterAndMaxRunning(t *testing.T) {
	for doc, want := range map[string]string{
		"name: b\ncommand: [train]\nafter: [b]\njobs: [{}]\n":                                 "names its own sweep b",
		"name: b\ncommand: [train]\njobs: [{seed: 1, after: [b.2]}, {seed: 2, after: b.1}]\n": "waits for itself: b.1 after b.2 after b.1",
		"name: b\ncommand: [train]\nafter: [\"A!\"]\njobs: [{}]\n":                            "A! is not a sweep name or job id",
		"name: b\ncommand: [train]\nmax_running: -1\njobs: [{}]\n":                            "max_running: -1 is not a whole number of at least 0",
		"name: b\ncommand: [train]\njobs: [{after: {x: 1}}]\n":                                "write a list of sweep names or job ids",
	} {
		if _, err := DecodeSweep("b.yaml", []byte(doc), Overrides{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", doc, err, want)
		}
	}
	// gpuq submit --after adds to what every job waits for.
	sw, err := DecodeSweep("b.yaml", []byte("name: b\ncommand: [train]\nafter: [x]\njobs: [{seed: 1}, {seed: 2, after: [y]}]\n"),
		Overrides{After: Override{Value: "z, x", Source: "--after"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sw.Jobs[0].AfterText() + " | " + sw.Jobs[1].AfterText(); got != "x and z | x, z and y" {
		t.Errorf("after: %s", got)
	}
}

// TestARenamedSweepWaitsForItsOwnJobs: a sweep submitted under another name (--name)
// waits for its own jobs under the new name where its file names them under its own;
// what it names of other sweeps stays.
func TestARenamedSweepWaitsForItsOwnJobs(t *testing.T) {
	doc := "name: dep\ncommand: [train]\nafter: [prep]\njobs: [{lr: 0.001}, {lr: 0.01, after: [dep.1]}, {lr: 0.1, after: [dep.2, other.3]}]\n"
	s, err := DecodeSweep("dep.yaml", []byte(doc), Overrides{Name: Override{Value: "dep3", Source: "--name"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range s.Jobs {
		got = append(got, j.ID+":"+strings.Join(j.After, ","))
	}
	if want := "dep3.1:prep dep3.2:prep,dep3.1 dep3.3:prep,dep3.2,other.3"; strings.Join(got, " ") != want {
		t.Errorf("after: %s, want %s", strings.Join(got, " "), want)
	}
	// What --after names is as written: the first run's job.
	s, err = DecodeSweep("dep.yaml", []byte(doc), Overrides{Name: Override{Value: "dep3", Source: "--name"}, After: Override{Value: "dep.2", Source: "--after"}})
	if err != nil || strings.Join(s.Jobs[0].After, ",") != "prep,dep.2" || strings.Join(s.Jobs[1].After, ",") != "prep,dep.2,dep3.1" {
		t.Errorf("--after dep.2: %v; %v, %v", err, s.Jobs[0].After, s.Jobs[1].After)
	}
	// As written, it names its own jobs.
	if s, err = DecodeSweep("dep.yaml", []byte(doc), Overrides{}); err != nil || strings.Join(s.Jobs[2].After, ",") != "prep,dep.2,other.3" {
		t.Errorf("unrenamed: %v, %v", s.Jobs[2].After, err)
	}
}
