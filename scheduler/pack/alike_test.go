package pack

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// alikeCase is a machine of up to 48 cards on up to four machines, and a queue of runs
// of alike jobs (a group's, as the store's queue offers them; some alike to an earlier
// run's, as another group of the same fit is), of two sweeps with
// quotas on some seeds (one sharing its cards' free slots with the other, one with a
// max_running), host memory on some, compute and known ends on others.
func alikeCase(seed uint64) ([]Request, []CardState, Hosts, int64) {
	r := rand.New(rand.NewPCG(seed, 29))
	cards := make([]CardState, 1+r.IntN(48))
	workers := []string{"", "a", "b", "c"}[:1+r.IntN(4)]
	next := map[string]int{}
	for i := range cards {
		total := []int64{24, 80}[r.IntN(2)] * gib
		w := workers[r.IntN(len(workers))]
		c := CardState{Worker: w, Index: next[w], Total: total, Slots: []int{0, 1, 2, 4, 8}[r.IntN(5)], Headroom: total / 20}
		next[w]++
		c.Running = r.IntN(c.Slots + 1)
		c.Reserved = int64(c.Running) * int64(1+r.IntN(10)) * gib
		c.Used = c.Reserved + int64(r.IntN(3))*gib
		cards[i] = c
	}
	withEnds(r, cards)
	var hosts Hosts
	if r.IntN(4) == 0 {
		hosts = Hosts{}
		for _, w := range workers {
			hosts[w] = HostState{Total: 256 * gib, Used: int64(r.IntN(200)) * gib}
		}
	}
	var quotas []*Quota
	if r.IntN(3) == 0 {
		free := make([]int, len(cards))
		for i := range free {
			free[i] = r.IntN(3)
		}
		for n := range 2 {
			q := &Quota{Slots: make([]int, len(cards)), Free: free}
			for i := range q.Slots {
				q.Slots[i] = 1 + r.IntN(4)
			}
			if n == 1 && r.IntN(2) == 0 {
				left := r.IntN(20)
				q.Left, q.Max = &left, 20
			}
			quotas = append(quotas, q)
		}
	}
	var queue []Request
	var runs []Request
	for len(queue) < 120 {
		if len(runs) > 0 && r.IntN(3) == 0 {
			// Jobs alike to an earlier run's, after others: another group of one fit.
			run := runs[r.IntN(len(runs))]
			for n := 1 + r.IntN(10); n > 0; n-- {
				j := run
				j.Job = fmt.Sprintf("j%d", len(queue))
				queue = append(queue, j)
			}
			continue
		}
		run := Request{Memory: int64(1+r.IntN(30)) * gib, GPUsPerJob: 1 + r.IntN(4)/3*r.IntN(3), Exclusive: r.IntN(15) == 0,
			Duration: time.Duration(r.IntN(4)) * 20 * time.Minute, Waited: time.Duration(r.IntN(2)) * DueAfter}
		if hosts != nil && r.IntN(2) == 0 {
			run.Host = int64(1+r.IntN(40)) * gib
		}
		if quotas != nil {
			run.Quota = quotas[r.IntN(len(quotas))]
		}
		runs = append(runs, run)
		for n := 1 + r.IntN(30); n > 0; n-- {
			j := run
			j.Job = fmt.Sprintf("j%d", len(queue))
			queue = append(queue, j)
		}
	}
	withCompute(r, cards, queue)
	smallest := int64(1 << 62)
	for _, q := range queue {
		smallest = min(smallest, q.Memory)
	}
	return queue, cards, hosts, smallest
}

// cloneQuotas gives queue quotas of its own, as they were: a packer changes them.
func cloneQuotas(queue []Request) []Request {
	out := slices.Clone(queue)
	made := map[*Quota]*Quota{}
	frees := map[*int]*[]int{}
	for i := range out {
		q := out[i].Quota
		if q == nil {
			continue
		}
		if c, ok := made[q]; ok {
			out[i].Quota = c
			continue
		}
		c := &Quota{Slots: q.Slots, Max: q.Max, OnePerCard: q.OnePerCard}
		if f, ok := frees[&q.Free[0]]; ok {
			c.Free = *f
		} else {
			c.Free = slices.Clone(q.Free)
			frees[&q.Free[0]] = &c.Free
		}
		if q.Left != nil {
			left := *q.Left
			c.Left = &left
		}
		made[q] = c
		out[i].Quota = c
	}
	return out
}

// TestAlikeJobsPlaceAsEveryCardLooked: the cards kept for a run of alike jobs pick
// exactly the cards a look at every card for each job picks, in Place and in Pack,
// over random machines and queues of runs of alike jobs.
func TestAlikeJobsPlaceAsEveryCardLooked(t *testing.T) {
	for seed := range uint64(2000) {
		queue, cards, hosts, smallest := alikeCase(seed)
		var got, want [2]Decision
		for k, noAlike := range []bool{false, true} {
			d := placeWith(&grouped{q: cloneQuotas(queue)}, slices.Clone(cards), maps.Clone(hosts), smallest, noAlike)
			p := packWith(cloneQuotas(queue), cards, hosts, noAlike)
			if k == 0 {
				got = [2]Decision{d, p}
			} else {
				want = [2]Decision{d, p}
			}
		}
		for k, what := range []string{"Place", "Pack"} {
			if !reflect.DeepEqual(got[k].Placements, want[k].Placements) || !reflect.DeepEqual(got[k].Reservation, want[k].Reservation) {
				t.Fatalf("seed %d: %s with the cards kept = %v %+v, looking at every card = %v %+v", seed, what,
					got[k].Placements, got[k].Reservation, want[k].Placements, want[k].Reservation)
			}
		}
		if len(want[0].Placements) == 0 && seed%50 == 0 {
			t.Logf("seed %d places nothing", seed)
		}
	}
}

// BenchmarkPlaceAlike places a fleet's round: 8,000 cards of 80 GiB, 2,000 jobs in
// groups of 200 alike, with the cards kept for each run of alike jobs and without.
//
//	go test -run '^$' -bench PlaceAlike ./scheduler/pack/
func BenchmarkPlaceAlike(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 1000))
	cards := make([]CardState, 8000)
	for i := range cards {
		c := CardState{Worker: fmt.Sprintf("w%04d", i/8), Index: i % 8, Total: 80 * gib, Headroom: 4 * gib, Slots: 16, Target: DefaultTarget}
		c.Running = r.IntN(4)
		c.Reserved = int64(c.Running) * int64(4+r.IntN(12)) * gib
		c.Used = c.Reserved
		c.Util = float64(c.Running) * 0.2
		cards[i] = c
	}
	var queue []Request
	for g := range 10 {
		for range 200 {
			queue = append(queue, Request{Job: fmt.Sprintf("j%d", len(queue)), Memory: int64(2+3*g) * gib, GPUsPerJob: 1,
				Util: 0.1 + 0.05*float64(g), Duration: time.Hour})
		}
	}
	for _, noAlike := range []bool{false, true} {
		b.Run(fmt.Sprintf("every-card=%v", noAlike), func(b *testing.B) {
			for b.Loop() {
				placeWith(&grouped{q: queue}, slices.Clone(cards), nil, 2*gib, noAlike)
			}
		})
	}
}

// TestARequestBelowTheFloorLowersIt: a request smaller than the packer was told to
// expect still finds the cards it fits, those under the floor among them.
func TestARequestBelowTheFloorLowersIt(t *testing.T) {
	p := newPacker([]CardState{card(0, 80*gib, 2), card(1, 24*gib, 2)}, nil, false, 40*gib)
	if picked := p.pick(&Request{Job: "a", Memory: 20 * gib}); !slices.Equal(picked, []int{1}) {
		t.Errorf("a 20 GiB job picked %v, want card 1, the tighter fit", picked)
	}
}
