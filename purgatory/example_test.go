package purgatory_test

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/samsa-broker/samsa/purgatory"
)

type partition struct {
	topic string
	index int32
}

// longPoll is a fetch waiting for MinBytes of new data on its partitions.
type longPoll struct {
	purgatory.Delayed
	available *atomic.Int64 // bytes readable past the fetch offset
	minBytes  int64
	done      chan string
}

func (f *longPoll) TryComplete() bool {
	if f.available.Load() >= f.minBytes {
		return f.ForceComplete()
	}
	return false
}

func (f *longPoll) OnExpiration() {}

func (f *longPoll) OnComplete() {
	if f.available.Load() >= f.minBytes {
		f.done <- "answered with data"
	} else {
		f.done <- "answered empty after max wait"
	}
}

func Example() {
	fetches := purgatory.New[partition]("fetch", purgatory.Options{})
	defer fetches.Close()

	var available atomic.Int64
	key := partition{"orders", 0}
	f := &longPoll{available: &available, minBytes: 100, done: make(chan string, 1)}
	f.Init(f, 30*time.Second) // max wait

	if !fetches.TryCompleteElseWatch(f, key) {
		// Not enough data yet: the fetch waits. A produce appends to the partition...
		available.Add(512)
		// ...and tells the purgatory, which completes the waiting fetch at once.
		fmt.Println("completed:", fetches.CheckAndComplete(key))
	}
	fmt.Println(<-f.done)
	// Output:
	// completed: 1
	// answered with data
}
