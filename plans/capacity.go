package plans

import "fmt"

// Card is a card as a sweep is checked against it, as an attempt is started on it
// (launcher), and as the report draws it: its index (nvidia-smi's), name and memory.
type Card struct {
	Index int
	Name  string
	Total int64
}

// CheckCards validates the sweep against the cards it will run on: the plan's length,
// jobs that need more cards than there are, and estimates no card can hold even when
// idle. Every problem names the job and the largest card.
func (s *Sweep) CheckCards(cards []Card, planSource string) error {
	c := &checker{file: s.File}
	if s.Plan != nil {
		if _, err := s.Plan.For(len(cards)); err != nil {
			field := "gpu_plan"
			if planSource != "" {
				c.errs = append(c.errs, &FieldError{File: planSource, Msg: err.Error()})
			} else {
				c.fail(field, "%v", err)
			}
		}
	}
	if len(cards) == 0 {
		return c.err()
	}
	largest := cards[0]
	for _, cd := range cards[1:] {
		if cd.Total > largest.Total {
			largest = cd
		}
	}
	room := s.Headroom.Room(largest.Total)
	var fs findings
	for _, j := range s.Jobs {
		if j.GPUsPerJob > len(cards) {
			fs.note(j.field("gpus_per_job"), j.ID, fmt.Sprintf("needs %d cards at once but the sweep has %d: lower gpus_per_job or add cards to gpus", j.GPUsPerJob, len(cards)))
		}
		if j.Memory > room {
			fs.note(j.field("memory"), j.ID, fmt.Sprintf("the estimate %s is larger than every card: the largest is GPU %d (%s, %s, %s after %s headroom); lower the estimate, spread the job over more cards with gpus_per_job, or lower headroom",
				FormatSize(j.Memory), largest.Index, largest.Name, FormatSize(largest.Total), FormatSize(room), s.Headroom))
		}
	}
	fs.fail(c, len(s.Jobs))
	return c.err()
}
