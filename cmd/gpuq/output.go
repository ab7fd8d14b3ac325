package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuq/gpuq/plans"
)

// newTable returns a writer that aligns tab-separated columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// bar draws used/total as a bar of width cells.
func bar(used, total int64, width int) string {
	if total <= 0 {
		return strings.Repeat("░", width)
	}
	n := int((used*int64(width) + total/2) / total)
	n = min(max(n, 0), width)
	return strings.Repeat("█", n) + strings.Repeat("░", width-n)
}

// gib prints bytes as GiB with two decimals, without the unit, for columns that name it.
func gib(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64)
}

func slotsText(n int) string {
	if n == plans.NoSlotLimit {
		return "-"
	}
	return strconv.Itoa(n)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
