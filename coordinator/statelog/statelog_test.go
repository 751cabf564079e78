package statelog

import (
	"errors"
	"slices"
	"testing"
)

// TestOrderedAnswersInAppendOrder: appends finishing out of order are answered in
// the order they were queued, each with its own outcome, once all before it are.
func TestOrderedAnswersInAppendOrder(t *testing.T) {
	var o ordered
	var got []int
	var errs []error
	pas := make([]*pending, 4)
	for i := range pas {
		pas[i] = &pending{done: func(err error) { got = append(got, i); errs = append(errs, err) }}
		o.queue = append(o.queue, pas[i])
	}
	failed := errors.New("failed")
	o.finish(pas[2], failed)
	o.finish(pas[1], nil)
	if len(got) != 0 {
		t.Fatalf("answered %v before the first append finished", got)
	}
	o.finish(pas[0], nil)
	if !slices.Equal(got, []int{0, 1, 2}) || errs[2] != failed || errs[0] != nil {
		t.Fatalf("answered %v with %v", got, errs)
	}
	o.finish(pas[3], nil)
	if !slices.Equal(got, []int{0, 1, 2, 3}) || len(o.queue) != 0 {
		t.Fatalf("answered %v, %d still queued", got, len(o.queue))
	}
}

// TestDeferred: a done the append calls before it returns is handed back to run
// later; one called afterwards runs at once.
func TestDeferred(t *testing.T) {
	var ran []error
	done := func(err error) { ran = append(ran, err) }
	sync := errors.New("sync")
	f := Deferred(func(cb func(error)) { cb(sync) }, done)
	if f == nil || len(ran) != 0 {
		t.Fatalf("a synchronous done: deferred %v, ran %v", f != nil, ran)
	}
	f()
	if len(ran) != 1 || ran[0] != sync {
		t.Fatalf("ran %v", ran)
	}
	var later func(error)
	if f := Deferred(func(cb func(error)) { later = cb }, done); f != nil {
		t.Fatal("an asynchronous done was deferred")
	}
	later(nil)
	if len(ran) != 2 || ran[1] != nil {
		t.Fatalf("ran %v", ran)
	}
}
