package pack

// The cards a run of alike requests may start on, kept from one pick to the next. A
// queue offers a group's jobs one after another, alike but for their names, and a
// fleet's round places thousands of them on thousands of cards: a pick that looked at
// every card for each of them was most of such a round.

// alike is the cards an alike request may take, as a heap best first (see less), for
// the request it was made for; gen is the packer's gen when the last pick was made
// from it, and last the card it took (-1: none). The heap is made (heaped) only once a
// second alike request comes: where requests are not alike, a look at every card for
// the best is all a pick needs, and making a heap of them cost as much again, twice.
type alike struct {
	r            Request
	gen          uint64
	last         int
	heap         []int
	made, heaped bool
}

// sameFit reports whether a and b ask the same of the cards: all but their job and how
// long it has waited, which no pick reads, and their sweeps, which decide nothing
// unless a planned sweep's job not measured yet counts (planned: the packer's; or they
// are such jobs): see apart. Runs of alike jobs of sweeps without a plan run on.
func sameFit(a, b *Request, planned bool) bool {
	return a.Memory == b.Memory && a.GPUsPerJob == b.GPUsPerJob && a.Exclusive == b.Exclusive && a.Host == b.Host &&
		a.Quota == b.Quota && a.Duration == b.Duration && a.Util == b.Util && a.UtilUnknown == b.UtilUnknown &&
		a.UtilPlanned == b.UtilPlanned && (a.Sweep == b.Sweep || !planned && !a.UtilPlanned)
}

// pickOne returns the card one card of r should start on, or -1: the first best in
// the cards' order, as a look at every card finds it. The cards kept for the last
// pick serve while r is alike and nothing but the start of that pick's job on the card
// it took has changed since: only that card needs another look. A request with host
// memory or a max_running changes more than its card as it starts, and is picked
// afresh.
func (p *packer) pickOne(r *Request) int {
	a := &p.alike
	kept := a.made && sameFit(&a.r, r, p.planned) && r.Host <= 0 && (r.Quota == nil || r.Quota.Left == nil)
	switch {
	case kept && a.last >= 0 && p.gen == a.gen+1:
		a.heapify(p)
		if i := a.last; p.candidate(i, r) {
			a.push(p, i)
		}
	case kept && a.last < 0 && p.gen == a.gen:
	default:
		a.gen, a.last = p.gen, a.first(p, r)
		return a.last
	}
	a.gen, a.last = p.gen, -1
	if len(a.heap) == 0 {
		return -1
	}
	a.last = a.pop(p)
	return a.last
}

// first keeps the cards r may start on, not yet as a heap, and takes out and returns
// the best of them, or -1.
func (a *alike) first(p *packer, r *Request) int {
	a.r, a.made, a.heaped, a.heap = *r, true, false, a.heap[:0]
	best := -1
	for _, i := range p.roomyFor(r) {
		if p.free[i] >= r.Memory && p.candidate(i, r) {
			if best < 0 || p.better(i, a.heap[best], r) {
				best = len(a.heap)
			}
			a.heap = append(a.heap, i)
		}
	}
	if best < 0 {
		return -1
	}
	i, n := a.heap[best], len(a.heap)-1
	a.heap[best], a.heap = a.heap[n], a.heap[:n]
	return i
}

// heapify makes the kept cards a heap, where they are not one yet.
func (a *alike) heapify(p *packer) {
	if a.heaped {
		return
	}
	for k := len(a.heap)/2 - 1; k >= 0; k-- {
		a.down(p, k)
	}
	a.heaped = true
}

// candidate reports whether r may start on card i.
func (p *packer) candidate(i int, r *Request) bool {
	return p.free[i] >= r.Memory && p.fits(i, r) && p.mayUse(i, r)
}

// less orders cards for a's request: the better first, then the lower index.
func (a *alike) less(p *packer, i, j int) bool {
	if p.better(i, j, &a.r) {
		return true
	}
	return !p.better(j, i, &a.r) && i < j
}

func (a *alike) push(p *packer, i int) {
	a.heap = append(a.heap, i)
	for k := len(a.heap) - 1; k > 0; {
		up := (k - 1) / 2
		if !a.less(p, a.heap[k], a.heap[up]) {
			break
		}
		a.heap[k], a.heap[up] = a.heap[up], a.heap[k]
		k = up
	}
}

func (a *alike) pop(p *packer) int {
	top := a.heap[0]
	n := len(a.heap) - 1
	a.heap[0] = a.heap[n]
	a.heap = a.heap[:n]
	a.down(p, 0)
	return top
}

func (a *alike) down(p *packer, k int) {
	for n := len(a.heap); ; {
		best := k
		for _, c := range []int{2*k + 1, 2*k + 2} {
			if c < n && a.less(p, a.heap[c], a.heap[best]) {
				best = c
			}
		}
		if best == k {
			return
		}
		a.heap[k], a.heap[best] = a.heap[best], a.heap[k]
		k = best
	}
}
