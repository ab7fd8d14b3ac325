package plans

// A job's timeout: how long an attempt may run before gpuq stops it, so that a hung
// trainer (an NCCL collective waiting forever) does not hold a card for good.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Timeout bounds each attempt of a job.
type Timeout struct {
	After   time.Duration // 0 = none
	Retries int           // attempts started again after a timeout before the job fails
}

// timeoutKeys are the keys of a timeout mapping.
var timeoutKeys = []string{"after", "retries"}

// timeout reads `timeout: 6h` or `timeout: {after: 6h, retries: 1}`.
func (c *checker) timeout(field, job string, v any) Timeout {
	var t Timeout
	after := v
	if m, ok := v.(*Map); ok {
		for _, k := range m.Keys {
			if !slices.Contains(timeoutKeys, k) {
				c.failJob(field+"."+k, job, "unknown key%s; a timeout is a duration (6h) or {after: 6h, retries: 1}", Suggest(k, timeoutKeys))
			}
		}
		after = m.Vals["after"]
		if r, ok := m.Get("retries"); ok {
			t.Retries = c.intValue(field+".retries", job, r, 0, 0)
		}
	}
	d, err := ParseDuration(after)
	if err != nil {
		c.failJob(field, job, "%v", err)
	}
	t.After = d
	return t
}

// ParseDuration reads a duration: 45m, 2h30m, 90s, or a number of seconds.
func ParseDuration(v any) (time.Duration, error) {
	var secs float64
	switch t := v.(type) {
	case int64:
		secs = float64(t)
	case float64:
		secs = t
	case Float:
		secs = t.Value
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(t), 64); err == nil {
			secs = f
			break
		}
		d, err := time.ParseDuration(strings.TrimSpace(t))
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a duration: write e.g. 45m, 2h30m or 90s", t)
		}
		return d, nil
	default:
		return 0, fmt.Errorf("write a duration such as 45m, 2h30m or 90s, not a %s", kindOf(v))
	}
	if secs <= 0 || math.IsNaN(secs) || secs > math.MaxInt64/float64(time.Second) {
		return 0, fmt.Errorf("%s is not a positive duration: write e.g. 45m, 2h30m or 90s", FormatValue(v))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// FormatDuration writes a duration as people do: 6h, 1h30m, 90s.
func FormatDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
