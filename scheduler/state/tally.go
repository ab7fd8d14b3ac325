package state

import (
	"cmp"
	"slices"
	"strconv"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// Tally counts the attempts that have ended with one outcome at one ladder tier, for as
// long as the state lives: gpuq clean forgets the attempts of the sweeps it forgets,
// not their count. It is written with the attempt's end, in the same change, so that
// the journal and the snapshot keep it, and a counter read from it (Prometheus's
// gpuq_attempts_total) never goes down.
type Tally struct {
	Outcome plans.Outcome
	Tier    int
	N       uint64
}

// tallyID is the id of the tally of an outcome at a tier.
func tallyID(outcome plans.Outcome, tier int) string {
	return string(outcome) + "/" + strconv.Itoa(tier)
}

const tableTallies = "tallies"

func tallyTables() map[string]*memdb.TableSchema {
	return map[string]*memdb.TableSchema{
		// By outcome and tier: the engine's count of an attempt's end, the metrics'
		// scrape of them all.
		tableTallies: {Name: tableTallies, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Tally](func(t *Tally) string { return tallyID(t.Outcome, t.Tier) })},
		}},
	}
}

// Counted returns the tally of an outcome at a tier with the attempt a added to it, to
// be put with a's end.
func (sn View) Counted(a *Attempt) *Tally {
	t := Tally{Outcome: a.Outcome, Tier: a.Tier}
	if old := lookup[*Tally](sn, tableTallies, tallyID(a.Outcome, a.Tier)); old != nil {
		t = *old
	}
	t.N++
	return &t
}

// Tallies returns every tally, by outcome and tier.
func (sn View) Tallies() []*Tally {
	ts := collect[*Tally](sn.txn, tableTallies, indexID)
	slices.SortFunc(ts, byOutcomeAndTier)
	return ts
}

// Recount returns the tallies of the ended attempts the state holds, for a state
// written before tallies were kept: what they count from then on starts where the
// history the state still holds leaves off. Nil when the state has tallies already, or
// no attempt has ended.
func (sn View) Recount() []*Tally {
	if len(sn.Tallies()) > 0 {
		return nil
	}
	return sn.shortOfHistory()
}

// shortOfHistory returns, raised to it, each tally that counts fewer attempts than the
// state holds ended so, or that the state lacks: a salvage's, whose records of tallies
// may be lost (see Salvage). Nil when none is.
func (sn View) shortOfHistory() []*Tally {
	by := map[string]*Tally{}
	for a := range sn.own.attempts.all() {
		if a.Running() {
			continue
		}
		id := tallyID(a.Outcome, a.Tier)
		if by[id] == nil {
			by[id] = &Tally{Outcome: a.Outcome, Tier: a.Tier}
		}
		by[id].N++
	}
	var out []*Tally
	for id, t := range by {
		if old := lookup[*Tally](sn, tableTallies, id); old == nil || old.N < t.N {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, byOutcomeAndTier)
	return out
}

// byOutcomeAndTier orders tallies by outcome, then tier.
func byOutcomeAndTier(a, b *Tally) int {
	return cmp.Or(cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Tier, b.Tier))
}
