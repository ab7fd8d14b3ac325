package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestReadPackerTakesMedians(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.txt")
	os.WriteFile(path, []byte(`goos: linux
BenchmarkPack/jobs=1000/cards=8-2   200   50000 ns/op   20000 decisions/s   300.0 p99-µs
BenchmarkPack/jobs=1000/cards=8-2   200   70000 ns/op   14000 decisions/s   900.0 p99-µs
BenchmarkPack/jobs=1000/cards=8-2   200   60000 ns/op   16000 decisions/s   400.0 p99-µs
BenchmarkPlace/jobs=1000/cards=8-2  200   4000 ns/op   250000 decisions/s   20.00 p99-µs
PASS
`), 0o644)
	got, err := readPacker(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []packResult{
		{name: "Pack/jobs=1000/cards=8", nsPerOp: 60000, perSecond: 16000, p99us: 400},
		{name: "Place/jobs=1000/cards=8", nsPerOp: 4000, perSecond: 250000, p99us: 20},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if _, err := readPacker(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file is no error")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
