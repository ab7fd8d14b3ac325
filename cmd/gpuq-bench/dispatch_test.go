package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestPrintDispatch: each case's figures are the medians of its runs, beside the other
// binary's and their ratio, and each figure with a target says whether it is met (the
// crowded machine's target is 80% of the quiet one's).
func TestPrintDispatch(t *testing.T) {
	o := dispatchOptions{jobs: 400, runs: 3, against: "main/gpuq", crowd: 2000, workers: 50, gpus: "sim:8x24GiB"}
	quiet := []dispatchFigures{{rate: 160, daemonMs: 1, restMs: 9}, {rate: 100, daemonMs: 2, restMs: 10}, {rate: 170, daemonMs: 1.5, restMs: 8}}
	crowded := []dispatchFigures{{rate: 110, daemonMs: 2, restMs: 10}, {rate: 130, daemonMs: 2, restMs: 10}, {rate: 115, daemonMs: 2, restMs: 10}}
	workers := []dispatchFigures{{rate: 150, daemonMs: 0.4, restMs: 6, idleWorkers: 0.02}, {rate: 140, daemonMs: 0.6, restMs: 6, idleWorkers: 0.1}, {rate: 155, daemonMs: 0.5, restMs: 6, idleWorkers: 0.04}}
	old := []dispatchFigures{{rate: 80, daemonMs: 2, restMs: 12, idleWorkers: 0.5}}
	figs := [][][]dispatchFigures{{quiet, old}, {crowded, old}, {workers, old}}
	var got bytes.Buffer
	printDispatch(&got, o, o.cases(), figs)
	golden := filepath.Join("testdata", "dispatch.txt")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("got\n%s\nwant\n%s", got.Bytes(), want)
	}
}

// TestRunDirsKept: a run's files stay until every run is done, then all go.
func TestRunDirsKept(t *testing.T) {
	dirs, err := newRunDirs()
	if err != nil {
		t.Fatal(err)
	}
	first, err := dirs.next()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(first, "journal"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := dirs.next()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{first, second} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("a run's directory is gone before every run is done: %v", err)
		}
	}
	dirs.removeAll()
	if _, err := os.Stat(dirs.root); !os.IsNotExist(err) {
		t.Errorf("the runs' directories are left: %v", err)
	}
}

// TestDispatchCardsWords: the heading names the daemon's cards, real ones by their
// --gpus, so that a table measured on a machine's cards is not read as a simulation's.
func TestDispatchCardsWords(t *testing.T) {
	for gpus, want := range map[string]string{
		"sim:8x24GiB": "simulated cards",
		"sim":         "simulated cards",
		"all":         "the machine's cards (--gpus all; workers' simulated)",
		"0,1":         "the machine's cards (--gpus 0,1; workers' simulated)",
	} {
		if got := (dispatchOptions{gpus: gpus}).cardsWords(); got != want {
			t.Errorf("gpus %q: %q, want %q", gpus, got, want)
		}
	}
}

// TestSimulatedNotice: a daemon asked for the machine's cards that found no driver says
// so in its log, and the dispatch bench finds that line rather than time simulated
// cards as real ones.
func TestSimulatedNotice(t *testing.T) {
	dir := t.TempDir()
	notice := "gpuq: no NVIDIA driver found (ERROR_LIBRARY_NOT_FOUND); using SIMULATED GPUs sim:4x24GiB. Choose another machine with --gpus sim:COUNTxSIZE."
	for name, want := range map[string]string{
		"gpuq: daemon listening\n" + notice + "\ngpuq: ready\n": notice,
		"gpuq: daemon listening\ngpuq: ready\n":                 "",
	} {
		log := filepath.Join(dir, "log")
		if err := os.WriteFile(log, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := simulatedNotice(log); got != want {
			t.Errorf("log %q: %q, want %q", name, got, want)
		}
	}
	if got := simulatedNotice(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("no log: %q", got)
	}
}

// TestCheckCards: -dispatch-gpus takes what --gpus does, but none; a bad one is refused
// before any daemon starts.
func TestCheckCards(t *testing.T) {
	for gpus, want := range map[string]string{
		"sim:8x24GiB": "",
		"all":         "",
		"0,1":         "",
		"none":        "-dispatch-gpus none: the dispatch daemon needs cards of its own",
		"sim:8x":      "-dispatch-gpus sim:8x: simulated machine",
		"zero":        `-dispatch-gpus zero: "zero" is not a card index`,
	} {
		err := (dispatchOptions{gpus: gpus}).checkCards()
		if want == "" && err != nil || want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("gpus %q: %v, want %q", gpus, err, want)
		}
	}
}
