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
			fs.note(j.field("memory"), j.ID, tooLarge(&j, largest, room, s.Headroom))
		}
	}
	fs.fail(c, len(s.Jobs))
	return c.err()
}

// tooLarge says why a job's estimate fits no card and what to do. Where its model's
// weights and their state alone, which no rung of an OOM ladder lowers, come to more
// than the card at every tier (see StateFloor), it says so, and what lowers them.
func tooLarge(j *Job, largest Card, room int64, headroom Headroom) string {
	card := fmt.Sprintf("the largest is GPU %d (%s, %s, %s after %s headroom)", largest.Index, largest.Name, FormatSize(largest.Total), FormatSize(room), headroom)
	if b, ok := j.StateFloor(); ok && b.Total() > room {
		return fmt.Sprintf("by its model, its weights and their state alone come to %s (weights %s, gradients %s, optimizer %s, copies %s, CUDA context %s), more than every card holds: %s; no rung of an OOM ladder lowers them: train fewer parameters (lora_rank, trainable), keep less optimizer state (optimizer: adamw-8bit, optimizer_state: bf16, offload_optimizer), or shard it over gpus_per_job cards (zero_stage)",
			FormatSize(b.Total()), FormatSize(b.Weights), FormatSize(b.Gradients), FormatSize(b.Optimizer), FormatSize(b.Copies), FormatSize(b.Context), card)
	}
	return fmt.Sprintf("the estimate %s is larger than every card: %s; lower the estimate, spread the job over more cards with gpus_per_job, or lower headroom",
		FormatSize(j.Memory), card)
}
