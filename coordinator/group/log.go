package group

import "errors"

// Log is where the coordinator keeps the partitions of __consumer_offsets it leads.
//
// Append appends recs to partition p, in order, and calls done exactly once: with nil
// when the records are durable by the broker's policy, or with an error. done may be
// called before Append returns or later from any goroutine; the coordinator copes with
// both. For one partition, done calls must come in Append order. Append must not keep
// recs (or their Key/Value slices) after done is called.
//
// Replay calls fn with every record of partition p in offset order, from the log
// start to its end, and returns fn's first error. Record slices are only valid during
// fn.
//
// Errors: wrap ErrNotLeader when this broker no longer leads p (the coordinator
// answers NOT_COORDINATOR), ErrRecordTooLarge when the batch exceeds the log's size
// limit (INVALID_COMMIT_OFFSET_SIZE); anything else is answered as
// COORDINATOR_NOT_AVAILABLE so the client retries.
type Log interface {
	Append(p int32, recs []Record, done func(error))
	Replay(p int32, fn func(Record) error) error
}

var (
	// ErrNotLeader is wrapped by a Log whose partition moved away.
	ErrNotLeader = errors.New("group: not the leader of the __consumer_offsets partition")
	// ErrRecordTooLarge is wrapped by a Log refusing an oversized append.
	ErrRecordTooLarge = errors.New("group: record batch too large")
	// ErrNotCoordinator is returned by Coordinator methods for partitions it does not own.
	ErrNotCoordinator = errors.New("group: not coordinator for partition")
)
