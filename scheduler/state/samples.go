package state

import "time"

// Sample is what an attempt's processes held on its fullest card from a moment on, until
// the next sample.
type Sample struct {
	At    time.Duration // since the attempt started
	Bytes int64
}

// Samples is an attempt's memory over time, kept compactly for reports: a point only
// where the reading moves by more than 1/sampleStep of the last one (a trainer's memory
// is flat for hours between a few steps), and at most maxSamples points however long it
// runs. A full series halves by merging neighbours into the higher of the two, so that a
// peak is never smoothed away.
type Samples []Sample

const (
	maxSamples = 64
	// sampleStep: readings within 1/64 (1.6%) of the last point are the same step;
	// NVML's per-process figure moves by a few MiB as the allocator breathes.
	sampleStep = 64
)

// Add returns the series with a reading at time at, and whether it changed. The series it
// was called on is left as it was: objects in the store are never changed in place.
func (s Samples) Add(at time.Duration, bytes int64) (Samples, bool) {
	if n := len(s); n > 0 {
		last := s[n-1].Bytes
		if d := bytes - last; d <= last/sampleStep && -d <= last/sampleStep {
			return s, false
		}
	}
	out := make(Samples, len(s), len(s)+1)
	copy(out, s)
	out = append(out, Sample{At: at, Bytes: bytes})
	if len(out) > maxSamples {
		out = out.halve()
	}
	return out, true
}

// halve merges each pair of neighbours into one point at the first's time holding the
// higher reading; the last point stays as it is, so the series still ends on the latest.
func (s Samples) halve() Samples {
	last := s[len(s)-1]
	body := s[:len(s)-1]
	out := make(Samples, 0, len(s)/2+1)
	for i := 0; i < len(body); i += 2 {
		p := body[i]
		if i+1 < len(body) {
			p.Bytes = max(p.Bytes, body[i+1].Bytes)
		}
		out = append(out, p)
	}
	return append(out, last)
}
