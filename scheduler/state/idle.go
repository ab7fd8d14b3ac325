package state

import (
	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// IdleUse is the least memory NVML counted as used on one card with nothing on it (the
// driver's own: 0.6 GiB of an idle H200), as the engine learned it (see the engine's
// idleUse). It is kept so that a daemon started again counts it at once, rather than
// only once a card happens to go idle again: with every card busy, a job that fits only
// once it is counted would wait meanwhile. It is written when the least changes, not
// each round.
type IdleUse struct {
	Worker string `json:",omitempty"` // the card's machine; "" for this one
	GPU    int
	// UUID and Total tell the card from another put in its place, whose idle use is
	// learned again (see Of): NVML's UUID where it gives one, and the card's memory.
	UUID  string `json:",omitempty"`
	Total int64
	Used  int64
}

// card is the card an IdleUse is about.
func (u *IdleUse) card() plans.CardID { return plans.CardID{Worker: u.Worker, Index: u.GPU} }

// Of reports whether u was learned of the card at its place with this UUID and total
// memory: the same card.
func (u *IdleUse) Of(uuid string, total int64) bool { return u.UUID == uuid && u.Total == total }

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
