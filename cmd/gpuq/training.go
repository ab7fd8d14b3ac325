package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// printTraining prints what a job's trainer reported of its training, attempt by
// attempt (a trainer run again starts its curve again), and how its sweep's early_stop
// judges it; nothing for a job that reported nothing and is not judged.
func printTraining(w io.Writer, j api.JobSummary) {
	reported := false
	for _, a := range j.Attempts {
		reported = reported || len(a.Metrics) > 0
	}
	if reported {
		fmt.Fprintln(w, "\ntraining, as its trainer reported it:")
		tw := newTable(w)
		fmt.Fprintln(tw, "  ATTEMPT\tMETRIC\tSTEP\tLATEST\tLOWEST\tHIGHEST")
		for _, a := range j.Attempts {
			for _, m := range a.Metrics {
				last := m.Latest()
				fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", a.N, m.Name, last.Step, metricValue(last.Value), metricValue(m.Min), metricValue(m.Max))
			}
		}
		tw.Flush()
	}
	if es := j.EarlyStop; es != nil {
		fmt.Fprintf(w, "\nearly stop: the point it is a seed of, %s, is judged by %s (%s) at steps %s", j.SeedOf, es.Metric, betterText(es.Mode), stepsText(es.At))
		if es.Group != "" {
			fmt.Fprintf(w, " among %s", es.Group)
		}
		if len(es.Rungs) == 0 {
			fmt.Fprintln(w, "; no reading there yet")
			return
		}
		readings := make([]string, len(es.Rungs))
		for i, r := range es.Rungs {
			readings[i] = fmt.Sprintf("%s at step %d", metricValue(r.Value), r.Step)
		}
		fmt.Fprintf(w, "; its readings: %s\n", strings.Join(readings, ", "))
	}
}

// betterText says which way a metric gets better.
func betterText(m plans.Mode) string {
	if m == plans.Max {
		return "higher is better"
	}
	return "lower is better"
}

func stepsText(at []int64) string {
	s := make([]string, len(at))
	for i, a := range at {
		s[i] = strconv.FormatInt(a, 10)
	}
	return strings.Join(s, ", ")
}

// metricValue writes a metric's value with four significant figures.
func metricValue(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
