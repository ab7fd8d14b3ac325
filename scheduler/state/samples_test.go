package state

import (
	"slices"
	"testing"
	"time"
)

func TestSamplesAdd(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		readings []int64 // one a second
		want     Samples
	}{
		{"first reading", []int64{0}, Samples{{0, 0}}},
		{"flat is one point", []int64{5000 * mib, 5000 * mib, 5000 * mib}, Samples{{0, 5000 * mib}}},
		{"the allocator breathing is no step", []int64{5000 * mib, 5040 * mib, 4970 * mib}, Samples{{0, 5000 * mib}}},
		{"steps", []int64{0, 3000 * mib, 3000 * mib, 9000 * mib, 0},
			Samples{{0, 0}, {time.Second, 3000 * mib}, {3 * time.Second, 9000 * mib}, {4 * time.Second, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Samples
			for i, r := range tt.readings {
				s, _ = s.Add(time.Duration(i)*time.Second, r)
			}
			if !slices.Equal(s, tt.want) {
				t.Errorf("got %v, want %v", s, tt.want)
			}
		})
	}
}

// A series stays bounded however long the attempt runs, keeps its highest reading, and
// ends on the latest; the series Add was called on is never changed (it is in the store).
func TestSamplesBoundedKeepPeak(t *testing.T) {
	var s Samples
	var kept Samples
	for i := range 10_000 {
		b := int64(1+i%7) << 30
		if i == 4321 {
			b = 80 << 30
		}
		if i == 100 {
			kept = slices.Clone(s)
			before := s
			s, _ = s.Add(time.Duration(i)*time.Second, b)
			if !slices.Equal(before, kept) {
				t.Fatal("Add changed the series it was called on")
			}
			continue
		}
		s, _ = s.Add(time.Duration(i)*time.Second, b)
		if len(s) > maxSamples {
			t.Fatalf("after %d readings the series holds %d points, more than %d", i+1, len(s), maxSamples)
		}
	}
	most := slices.MaxFunc(s, func(a, b Sample) int { return int(a.Bytes>>20 - b.Bytes>>20) })
	if most.Bytes != 80<<30 {
		t.Errorf("the peak of 80 GiB was lost: highest point %v", most)
	}
	if last := s[len(s)-1]; last.At != 9999*time.Second {
		t.Errorf("the series ends at %v, want the latest reading's 9999s", last.At)
	}
	for i := 1; i < len(s); i++ {
		if s[i].At <= s[i-1].At {
			t.Fatalf("points out of order: %v", s)
		}
	}
}
