package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestIdleUsesAreForgotten: a change forgets the idle use of the cards it names before
// it puts what it learned, so that a card forgotten and learned again in one change
// keeps what was learned; a card the table does not hold is forgotten without a word.
// What was forgotten stays so in the journal, in the snapshot of a compaction and in a
// salvage.
func TestIdleUsesAreForgotten(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	row := func(worker string, gpu int, used int64) *IdleUse {
		return &IdleUse{Worker: worker, GPU: gpu, UUID: fmt.Sprintf("GPU-%s-%d", worker, gpu), Total: 80 * gib, Used: used, Seen: at}
	}
	must(t, s.Put(Change{IdleUses: []*IdleUse{row("n1", 0, 500<<20), row("n1", 1, 500<<20), row("n2", 0, 500<<20)}}))
	must(t, s.Put(Change{IdleUsesGone: []plans.CardID{{Worker: "n1", Index: 0}, {Worker: "n9", Index: 0}}}))
	must(t, s.Put(Change{IdleUsesGone: []plans.CardID{{Worker: "n2", Index: 0}}, IdleUses: []*IdleUse{row("n2", 0, 400<<20)}}))
	comesBack(t, s, dir, func(s *Store, when string) {
		t.Helper()
		got := s.View().IdleUses()
		want := map[plans.CardID]IdleUse{{Worker: "n1", Index: 1}: *row("n1", 1, 500<<20), {Worker: "n2", Index: 0}: *row("n2", 0, 400<<20)}
		if len(got) != len(want) {
			t.Errorf("%s: %d idle uses, want %d", when, len(got), len(want))
		}
		for card, w := range want {
			if u := got[card]; u == nil || *u != w {
				t.Errorf("%s: card %s's idle use %+v, want %+v", when, card, u, w)
			}
		}
	})
}

// TestAReplacedCardIsToldOnlyWhenReadWhole: a card at an idle use's place is another
// where NVML reads it whole and it differs; a UUID or a memory that NVML could not
// read says nothing.
func TestAReplacedCardIsToldOnlyWhenReadWhole(t *testing.T) {
	withUUID := &IdleUse{GPU: 0, UUID: "GPU-5a3e", Total: 24 * gib}
	noUUID := &IdleUse{GPU: 0, Total: 24 * gib} // learned where NVML gave none
	for _, tc := range []struct {
		u     *IdleUse
		uuid  string
		total int64
		want  bool
	}{
		{withUUID, "GPU-5a3e", 24 * gib, false},
		{withUUID, "GPU-77c1", 24 * gib, true},
		{withUUID, "GPU-5a3e", 48 * gib, true},
		{withUUID, "", 24 * gib, false},
		{withUUID, "GPU-77c1", 0, false},
		{noUUID, "", 24 * gib, false},
		{noUUID, "", 48 * gib, true},
		{noUUID, "GPU-77c1", 24 * gib, true},
	} {
		if got := tc.u.Replaced(tc.uuid, tc.total); got != tc.want {
			t.Errorf("learned of %q, %s; read %q, %s: replaced %v, want %v", tc.u.UUID, plans.FormatSize(tc.u.Total), tc.uuid, plans.FormatSize(tc.total), got, tc.want)
		}
	}
}
