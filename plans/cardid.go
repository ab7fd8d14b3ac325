package plans

import (
	"fmt"
	"strconv"
	"strings"
)

// CardID names a card: its machine (a gpuq worker, "" for this one) and its index
// there.
type CardID struct {
	Worker string
	Index  int
}

// String is how people name the card: "3" on this machine, "node7:3" on a worker.
func (c CardID) String() string {
	if c.Worker == "" {
		return strconv.Itoa(c.Index)
	}
	return c.Worker + ":" + strconv.Itoa(c.Index)
}

// ParseCardID reads a card's name as String writes it; a worker's name has no colon.
func ParseCardID(name string) (CardID, error) {
	var c CardID
	idx := name
	if w, i, ok := strings.Cut(name, ":"); ok {
		c.Worker, idx = w, i
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return CardID{}, fmt.Errorf("%q is not a card (3, or WORKER:3 on a worker); gpuq gpus lists them", name)
	}
	c.Index = n
	return c, nil
}

// Cards names cards of one machine as gpuq status and top show them: "0,1", or on a
// worker "node7:0,1".
func Cards(worker string, indices []int) string {
	s := make([]string, len(indices))
	for i, n := range indices {
		s[i] = strconv.Itoa(n)
	}
	if worker == "" {
		return strings.Join(s, ",")
	}
	return worker + ":" + strings.Join(s, ",")
}

// CardsOn names cards of one machine in a sentence: "GPU 0", "GPUs 0,1", or on a
// worker "GPU node7:0", as Cards names them.
func CardsOn(worker string, indices []int) string {
	if len(indices) == 1 {
		return "GPU " + Cards(worker, indices)
	}
	return "GPUs " + Cards(worker, indices)
}
