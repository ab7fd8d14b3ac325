package state

import (
	"time"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// IdleUse is the least memory NVML counted as used on one card with nothing on it (the
// driver's own: 0.6 GiB of an idle H200), as the engine learned it (see the engine's
// idleUse). It is kept so that a daemon started again counts it at once, rather than
// only once a card happens to go idle again: with every card busy, a job that fits only
// once it is counted would wait meanwhile. It is written when the least changes, not
// each round.
//
// The table is kept small (see the engine's placeCards): a card's row goes once
// another card is read in its place (Replaced), and of the cards that are away (their
// workers gone), the engine keeps the rows of those it saw last. The journal says a
// row is gone (Change.IdleUsesGone); an older gpuq passes over that, and keeps it.
type IdleUse struct {
	Worker string `json:",omitempty"` // the card's machine; "" for this one
	GPU    int
	// UUID and Total tell the card from another put in its place, whose idle use is
	// learned again (see Of): NVML's UUID where it gives one, and the card's memory.
	UUID  string `json:",omitempty"`
	Total int64
	Used  int64
	// Seen is when the engine last had the card in its reading, as far as the store
	// knows: when it learned the card's idle use, or when the card left its reading.
	// Zero in a state written before it was kept: seen before any that has it.
	Seen time.Time `json:",omitzero"`
}

// card is the card an IdleUse is about.
func (u *IdleUse) card() plans.CardID { return plans.CardID{Worker: u.Worker, Index: u.GPU} }

// Of reports whether u was learned of the card at its place with this UUID and total
// memory: the same card.
func (u *IdleUse) Of(uuid string, total int64) bool { return u.UUID == uuid && u.Total == total }

// Replaced reports whether a card read at u's place with this UUID and total memory is
// another card than the one u was learned of. Only a card read whole tells: its memory
// known, and its UUID where u has one; one that NVML could not read in full may be
// the same card.
func (u *IdleUse) Replaced(uuid string, total int64) bool {
	return total > 0 && (uuid != "" || u.UUID == "") && !u.Of(uuid, total)
}

const tableIdleUses = "idle_uses"

func idleTables() map[string]*memdb.TableSchema {
	return map[string]*memdb.TableSchema{
		// By card: the engine reads them all as it places the cards it reads.
		tableIdleUses: {Name: tableIdleUses, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*IdleUse](func(u *IdleUse) string { return u.card().String() })},
		}},
	}
}

// IdleUses returns what was learned of each card's idle use, by card.
func (sn View) IdleUses() map[plans.CardID]*IdleUse {
	out := map[plans.CardID]*IdleUse{}
	for u := range each[*IdleUse](sn.txn.Get, tableIdleUses, indexID) {
		out[u.card()] = u
	}
	return out
}
