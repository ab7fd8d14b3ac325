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

// CardsOn names cards of one machine for people: "GPU [0 1]", or "node7 GPU [0]".
func CardsOn(worker string, indices []int) string {
	if worker == "" {
		return fmt.Sprintf("GPU %v", indices)
	}
	return fmt.Sprintf("%s GPU %v", worker, indices)
}
