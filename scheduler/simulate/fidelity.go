package simulate

// How well the sharing model (pack.Speed) predicts measured pairs of jobs sharing a
// card.

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/scheduler/pack"
)

// PairsFile holds Lucid's 1,388 measured pairs, each job with its utilization alone and
// its speed beside the other (relative to alone); its header says where they are from.
const PairsFile = "scheduler/simulate/testdata/lucid_pairs.csv"

// PairsError is the sharing model's error on measured pairs read from r (PairsFile's
// format), with cost its colocation cost: the mean absolute difference between each
// job's measured speed and pack.Speed of the pair's summed utilization, over every
// job of every pair, and how many jobs that is.
func PairsError(r io.Reader, cost float64) (mae float64, n int, err error) {
	rows := csv.NewReader(skipComments(r))
	head, err := rows.Read()
	if err != nil {
		return 0, 0, fmt.Errorf("pairs: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	num := func(row []string, name string) (float64, error) {
		i, ok := col[name]
		if !ok {
			return 0, fmt.Errorf("pairs: no column %s", name)
		}
		return strconv.ParseFloat(row[i], 64)
	}
	var sum float64
	for {
		row, err := rows.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("pairs: %w", err)
		}
		var f [4]float64
		for i, name := range []string{"util1", "util2", "speed1", "speed2"} {
			if f[i], err = num(row, name); err != nil {
				return 0, 0, fmt.Errorf("pairs: %s: %w", name, err)
			}
		}
		predicted := pack.Speed((f[0]+f[1])/100, 2, cost)
		sum += math.Abs(predicted-f[2]) + math.Abs(predicted-f[3])
		n += 2
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("pairs: none")
	}
	return sum / float64(n), n, nil
}

// skipComments drops the lines that start with #.
func skipComments(r io.Reader) io.Reader {
	var b strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "#") {
			b.WriteString(sc.Text())
			b.WriteByte('\n')
		}
	}
	return strings.NewReader(b.String())
}
