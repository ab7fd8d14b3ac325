package plans

import (
	"fmt"
	"strconv"
)

// Switch is a common change that lowers a job's memory, with the job as it would be.
type Switch struct {
	Change string // as a person says it
	Model  Model
}

// defaultLoRARank is the rank the LoRA switches suggest: PEFT users' usual 16, the
// seed notes' too.
const defaultLoRARank = 16

// Switches are the usual ways to make a job need less memory, each applied alone to m;
// those that change nothing for m are left out: gradient checkpointing, half the
// micro-batch with twice the accumulation, 8-bit AdamW, LoRA, QLoRA (NF4 weights), and
// logits for the last position only (a classifier's).
func (m Model) Switches() []Switch {
	var out []Switch
	add := func(change string, edit func(*Model)) {
		s := m
		edit(&s)
		out = append(out, Switch{Change: change, Model: s})
	}
	arch := m.Layers > 0 && m.Hidden > 0
	if !m.GradientCheckpointing && arch && m.SeqLen > 0 && m.MicroBatch > 0 {
		add("gradient checkpointing", func(s *Model) { s.GradientCheckpointing = true })
	}
	if m.MicroBatch > 1 {
		add(fmt.Sprintf("micro-batch %d, accumulation ×2", m.MicroBatch/2), func(s *Model) { s.MicroBatch /= 2 })
	}
	if m.LoRARank == 0 && m.Optimizer == "adamw" {
		add("8-bit AdamW (bitsandbytes)", func(s *Model) { s.Optimizer = "adamw-8bit" })
	}
	if m.LoRARank == 0 && arch && m.ZeROStage == 0 {
		add(fmt.Sprintf("LoRA r=%d on q_proj, v_proj", defaultLoRARank), func(s *Model) {
			s.LoRARank, s.LoRATargets, s.Trainable = defaultLoRARank, nil, Trainable{}
		})
	}
	if m.Precision != "nf4" && arch && m.ZeROStage == 0 {
		add("QLoRA: NF4 weights, LoRA r="+strconv.Itoa(max(m.LoRARank, defaultLoRARank)), func(s *Model) {
			s.Precision = "nf4"
			if s.LoRARank == 0 {
				s.LoRARank, s.LoRATargets, s.Trainable = defaultLoRARank, nil, Trainable{}
			}
		})
	}
	if m.Vocab > 0 && m.SeqLen > 1 && m.MicroBatch > 0 && m.LogitsToKeep != 1 {
		add("logits of the last position only (logits_to_keep: 1; a classifier)", func(s *Model) { s.LogitsToKeep = 1 })
	}
	return out
}
