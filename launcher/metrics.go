package launcher

// Where an attempt's training metrics are written and how gpuq reads them: the
// trainer's own file (GPUQ_METRICS_FILE), and what gpuq reads from its output as it tees it.

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/plans"
)

const (
	// MetricsVar names the trainer's metrics file in its environment.
	MetricsVar = "GPUQ_METRICS_FILE"
	// metricsFile is the trainer's: one JSON object a line, {"step": 500, "loss": 1.92}.
	metricsFile = "metrics.jsonl"
	// outputMetricsFile is what gpuq read from the trainer's output, in the same form.
	outputMetricsFile = "output-metrics.jsonl"
	// maxMetricsLine bounds a line of either: longer ones are not records.
	maxMetricsLine = 64 << 10
	// barEvery is how often a progress bar's postfix is written down: a bar is
	// redrawn ten times a second, and each redraw a record would be noise.
	barEvery = time.Second
)

// MetricsPath is the trainer's metrics file in an attempt's directory.
func MetricsPath(dir string) string { return filepath.Join(dir, metricsFile) }

// freshMetrics removes the metrics files an earlier run left in an attempt's directory
// (gpuq run --log-dir used again), which the trainer would append to.
func freshMetrics(dir string) {
	for _, f := range []string{metricsFile, outputMetricsFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}

// outputMetrics is an io.Writer on an attempt's output that writes the metrics it
// reads there to the attempt's output-metrics.jsonl. It never fails a write: the
// output goes on to the log and the ring whatever becomes of its metrics.
type outputMetrics struct {
	path    string
	f       *os.File
	failed  bool
	lines   *lineReader
	partial []byte
	long    bool // the line being read is past maxMetricsLine: skipped to its end
	// pending is a bar's latest postfix not yet written; barAt when one last was.
	pending []plans.Reading
	barAt   time.Time
	now     func() time.Time
}

func newOutputMetrics(dir string) *outputMetrics {
	return &outputMetrics{path: filepath.Join(dir, outputMetricsFile), lines: newLineReader(), now: time.Now}
}

func (o *outputMetrics) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			o.keep(p)
			break
		}
		o.keep(p[:i])
		if !o.long {
			o.line(string(o.partial))
		}
		o.partial, o.long = o.partial[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// keep adds to the line being read, up to maxMetricsLine.
func (o *outputMetrics) keep(b []byte) {
	if o.long || len(o.partial)+len(b) > maxMetricsLine {
		o.long = true
		return
	}
	o.partial = append(o.partial, b...)
}

func (o *outputMetrics) line(s string) {
	rs, fromBar := o.lines.read(s)
	if len(rs) == 0 {
		return
	}
	if fromBar {
		o.pending = rs
		if now := o.now(); now.Sub(o.barAt) >= barEvery {
			o.barAt = now
			o.flush()
		}
		return
	}
	o.flush() // what a bar said before this line comes first
	o.write(rs)
}

// flush writes the bar's latest postfix, if not yet written.
func (o *outputMetrics) flush() {
	if len(o.pending) > 0 {
		o.write(o.pending)
		o.pending = nil
	}
}

// write appends readings of one step as a record.
func (o *outputMetrics) write(rs []plans.Reading) {
	if o.failed {
		return
	}
	if o.f == nil {
		f, err := createPrivate(o.path)
		if err != nil {
			o.failed = true
			return
		}
		o.f = f
	}
	if _, err := o.f.Write(recordOf(rs)); err != nil {
		o.failed = true
	}
}

// Close writes what a bar said last, and closes the file.
func (o *outputMetrics) Close() error {
	o.flush()
	if o.f == nil {
		return nil
	}
	return o.f.Close()
}

// recordOf writes readings of one step as a metrics record.
func recordOf(rs []plans.Reading) []byte {
	b := strconv.AppendInt([]byte(`{"step": `), rs[0].Step, 10)
	for _, r := range rs {
		b = append(b, `, "`...)
		b = append(b, r.Name...) // a metric's name needs no escaping (plans.MetricName)
		b = append(b, `": `...)
		b = appendNumber(b, r.Value)
	}
	return append(b, "}\n"...)
}

// appendNumber writes a number as JSON does, and NaN and the infinities as Python's
// json.dumps does, which ParseMetricsRecord reads.
func appendNumber(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "Infinity"...)
	case math.IsInf(v, -1):
		return append(b, "-Infinity"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// MetricsTail reads an attempt's metrics as they are written: the trainer's file, and
// what gpuq read from its output. Once the trainer's file has a record, its output is
// not read from then on: what a trainer writes on purpose wins over what gpuq guessed.
// It is used by one goroutine.
type MetricsTail struct {
	file, output tailFile
	explicit     bool
}

// tailFile is a file read in turns: where the last read stopped, the line it stopped
// in, and how many records it has read.
type tailFile struct {
	path    string
	off     int64
	partial []byte
	long    bool
	records int64
}

// readBudget bounds what one Read takes of a file, so that a trainer that wrote a
// great deal at once delays no round: the rest is read at the next.
const readBudget = 1 << 20

// NewMetricsTail reads the metrics of the attempt in dir from their start.
func NewMetricsTail(dir string) *MetricsTail {
	return &MetricsTail{file: tailFile{path: MetricsPath(dir)}, output: tailFile{path: filepath.Join(dir, outputMetricsFile)}}
}

// Read returns the readings written since the last Read, in the order written.
func (t *MetricsTail) Read() []plans.Reading {
	rs := t.file.read()
	if t.file.records > 0 {
		t.explicit = true
	}
	if !t.explicit {
		rs = append(rs, t.output.read()...)
	}
	return rs
}

func (tf *tailFile) read() []plans.Reading {
	f, err := os.OpenFile(tf.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	if fi.Size() < tf.off { // written anew from its start
		*tf = tailFile{path: tf.path, records: tf.records}
	}
	if fi.Size() == tf.off {
		return nil
	}
	buf := make([]byte, min(fi.Size()-tf.off, readBudget))
	n, err := f.ReadAt(buf, tf.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	tf.off += int64(n)
	var rs []plans.Reading
	data := buf[:n]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		rs = append(rs, tf.record(data[:i])...)
		data = data[i+1:]
	}
	if len(tf.partial)+len(data) > maxMetricsLine {
		tf.partial, tf.long = tf.partial[:0], true
	} else if !tf.long {
		tf.partial = append(tf.partial, data...)
	}
	return rs
}

// record reads a whole line, with what an earlier read left of it.
func (tf *tailFile) record(line []byte) []plans.Reading {
	long := tf.long
	if len(tf.partial) > 0 {
		line = append(tf.partial, line...)
		tf.partial = nil
	}
	tf.long = false
	if long || len(line) > maxMetricsLine {
		return nil
	}
	rs, ok := plans.ParseMetricsRecord(line, tf.records+1)
	if ok {
		tf.records++
	}
	return rs
}

// alsoTo writes to a writer (nil: none) and to the output's metrics, whatever either
// says: the output goes on to the log and the ring regardless.
type alsoTo struct {
	w       io.Writer
	metrics *outputMetrics
}

func (a alsoTo) Write(p []byte) (int, error) {
	if a.w != nil {
		a.w.Write(p)
	}
	return a.metrics.Write(p)
}
