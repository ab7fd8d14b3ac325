package plans

import "testing"

// BenchmarkDefaultNames names the jobs of a sweep of 100,000 (100 tasks × 1,000 seeds):
// a daemon decodes each sweep again, names and all, as it replays its journal.
func BenchmarkDefaultNames(b *testing.B) {
	doc := []byte("name: big\ncommand: [train, \"{task}\", \"{seed}\"]\nmemory: 1GiB\nmatrix:\n  task: [" + seq("t", 100) + "]\n  seed: [" + seq("", 1000) + "]\n")
	s, err := DecodeSweep("big.yaml", doc, Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		defaultNames(s)
	}
}

func seq(prefix string, n int) string {
	out := ""
	for i := range n {
		if i > 0 {
			out += ", "
		}
		out += prefix + string(rune('a'+i%26)) + itoa(i)
	}
	return out
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
