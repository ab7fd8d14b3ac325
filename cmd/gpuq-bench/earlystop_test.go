package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEarlyStopping: the traces with an early_stop are simulated both ways and held to
// the targets; the others are left out.
func TestEarlyStopping(t *testing.T) {
	files, _ := filepath.Glob("../../examples/traces/*.yaml")
	var some []string
	for _, f := range files {
		if b := filepath.Base(f); b == "early-stop.yaml" || b == "gla.yaml" {
			some = append(some, f)
		}
	}
	rs, err := earlyStopping(some, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].trace != "early-stop" || rs[0].cut() < esTarget || !rs[0].bestFinished() {
		t.Fatalf("%+v", rs)
	}
	var b strings.Builder
	printEarlyStopping(&b, rs)
	if !strings.Contains(b.String(), "early-stop    27                 8h00m            4h00m  50%       16                  yes") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	checkEarlyStopping(func(ok bool, format string, args ...any) {
		if !ok {
			t.Errorf("not met: "+format, args...)
		}
	}, rs)
}
