package state

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestEveryFieldComesBack: every field of every object the store keeps (submissions,
// jobs, attempts, shapes, drains, allocation queues and allocations, tallies, idle
// uses), each set by reflection to a value of its own, comes back the same, to the last
// field, from the journal, from the snapshot of a clean stop, and from a salvage of
// that snapshot. A field added to a stored type is filled here without a word; one
// that the journal or the snapshot then drops, or that a replay overwrites, fails this
// test by name.
// Beside them, a job and an attempt at tier 0, whose parameters a snapshot leaves to
// the sweep (see withoutParams), and a job as submitted, which it leaves out.
func TestEveryFieldComesBack(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	sw, err := plans.DecodeSweep("testdata/journal-sweep.yaml", []byte(journalSweep), plans.Overrides{})
	must(t, err)
	f := &filler{t: t, at: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	sub := filled[Submission](f)
	sub.Sweep = sw
	must(t, s.Submit(sub))
	stored := *s.View().Submission("j")
	sub = &stored
	sub.SweepStatus = *filled[SweepStatus](f)

	view := s.View()
	job := func(id string, params *plans.Map) *Job {
		j := *view.Job(id)
		j.Status = *filled[Status](f)
		if params != nil {
			j.Current = params
		}
		return &j
	}
	attempt := func(j *Job, params *plans.Map) *Attempt {
		a := filled[Attempt](f)
		a.ID, a.Job, a.N = AttemptID(j.ID, 1), j.ID, 1
		if params != nil {
			a.Params = params
		}
		return a
	}
	j1 := job("j.1", nil)
	j2 := job("j.2", view.Job("j.2").Params) // j.3 stays as submitted
	a1, a2 := attempt(j1, nil), attempt(j2, j2.Params)
	c := Change{
		Sweeps:      []*Submission{sub},
		Jobs:        []*Job{j1, j2},
		Attempts:    []*Attempt{a1, a2},
		Shapes:      []*Shape{filled[Shape](f)},
		Drains:      []*Drain{filled[Drain](f)},
		AllocQueues: []*AllocQueue{filled[AllocQueue](f)},
		Allocations: []*Allocation{filled[Allocation](f)},
		IdleUses:    []*IdleUse{filled[IdleUse](f)},
		// Others', which are not there: what is forgotten has no field to keep.
		IdleUsesGone:    []plans.CardID{{Worker: "away", Index: 1}},
		AllocationsGone: []string{"ended-long-ago"},
	}
	// A count for each attempt's end, as the engine keeps it: a salvage raises one
	// that falls short of them (see raiseTallies).
	for _, a := range c.Attempts {
		tl := filled[Tally](f)
		tl.Outcome, tl.Tier = a.Outcome, a.Tier
		c.Tallies = append(c.Tallies, tl)
	}
	if n := reflect.TypeFor[Change]().NumField(); n != 11 {
		t.Fatalf("Change has %d fields: give the new one an object here", n)
	}
	f.everyFieldSet(reflect.ValueOf(c), "Change")
	must(t, s.Put(c))
	want := everything(s.View())
	comesBack(t, s, dir, func(s *Store, when string) {
		t.Helper()
		if where := firstDiff(reflect.ValueOf(want), reflect.ValueOf(everything(s.View())), "Change"); where != "" {
			t.Errorf("%s: %s", when, where)
		}
	})
}

// everything is every object the store holds, as a change.
func everything(view View) Change {
	c := view.all()
	c.Sweeps, c.Jobs = view.Submissions(), view.Jobs()
	return c
}

// filler sets every exported field of a value, however deep, to a value that is not
// its type's zero and that no other field holds (n counts them), so that a field
// dropped, or read into another, shows.
type filler struct {
	t  *testing.T
	n  int
	at time.Time
}

// filled is a T with every field set.
func filled[T any](f *filler) *T {
	v := new(T)
	f.fill(reflect.ValueOf(v).Elem(), reflect.TypeFor[T]().Name())
	return v
}

var (
	timeType = reflect.TypeFor[time.Time]()
	mapType  = reflect.TypeFor[plans.Map]()
)

func (f *filler) fill(v reflect.Value, path string) {
	f.n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(f.at.Add(time.Duration(f.n) * time.Second)))
		return
	case v.Type() == mapType: // its keys and its values agree, and the values are any
		m := plans.NewMap()
		m.Set(fmt.Sprintf("k%d", f.n), fmt.Sprintf("v%d", f.n))
		v.Set(reflect.ValueOf(*m))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		f.fill(v.Index(0), path+"[0]")
	case reflect.Map:
		key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		f.fill(key, path+"[key]")
		f.fill(val, path+"[value]")
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(key, val)
	case reflect.Struct:
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() {
				f.fill(v.Field(i), path+"."+sf.Name)
			}
		}
	default:
		f.t.Fatalf("%s: the filler cannot fill a %s: teach it", path, v.Type())
	}
}

// everyFieldSet fails the test on an exported field that is its type's zero: one the
// filler missed, or one the store did not keep as it was put. What a sweep file says
// (the submission's sweep, a job as written) is the sweep's, not the state's.
func (f *filler) everyFieldSet(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			f.everyFieldSet(v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			f.everyFieldSet(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.Type() == timeType || v.Type() == mapType {
			return
		}
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			switch {
			case !sf.IsExported(), sf.Type == reflect.TypeFor[*plans.Sweep](), sf.Type == reflect.TypeFor[*plans.Job]():
			case v.Field(i).IsZero():
				f.t.Errorf("%s.%s is not set: the fixture does not hold every field", path, sf.Name)
			default:
				f.everyFieldSet(v.Field(i), path+"."+sf.Name)
			}
		}
	}
}

// firstDiff names the first field where a and b differ, with both values; "" when they
// are deeply equal.
func firstDiff(a, b reflect.Value, path string) string {
	if !a.IsValid() || !b.IsValid() || a.Type() != b.Type() {
		return fmt.Sprintf("%s: %v, then %v", path, a, b)
	}
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			return firstDiff(a.Elem(), b.Elem(), path)
		}
	case reflect.Slice:
		if a.Len() == b.Len() {
			for i := range a.Len() {
				if d := firstDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
					return d
				}
			}
		}
	case reflect.Struct:
		if a.Type() == timeType {
			break
		}
		for i := range a.NumField() {
			if sf := a.Type().Field(i); sf.IsExported() {
				if d := firstDiff(a.Field(i), b.Field(i), path+"."+sf.Name); d != "" {
					return d
				}
			}
		}
	}
	return fmt.Sprintf("%s: %+v, then %+v", path, a.Interface(), b.Interface())
}
