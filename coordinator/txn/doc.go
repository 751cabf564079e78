// Package txn owns the transaction coordinator (KIP-98, with KIP-890's
// epoch bump per transaction): the state of each transactional id of the
// __transaction_state partitions this broker leads, producer id and epoch
// assignment and fencing, the transaction state machine, timeouts and
// expiry, the markers written to the data partitions when a transaction
// ends, and the records __transaction_state keeps, in Kafka's schemas. It
// also holds the partition leader's side of WriteTxnMarkers
// (MarkerWriter).
//
// The coordinator does no network I/O. Requests arrive as kmsg structs,
// answers leave through callbacks; time and timers come from a Clock;
// durability is behind Log ("append these records to partition p, tell
// me when durable"; "replay p"), the markers behind MarkerChannel, new
// producer ids behind ProducerIDs. On a cluster Log is ReplicatedLog
// (acks=all through replication) and MarkerChannel is Markers (the
// leaders from the metadata image, WriteTxnMarkers to them); tests drive
// the core with fakes, deterministically.
//
// # States (Kafka's TransactionState)
//
//	InitProducerId          AddPartitionsToTxn / AddOffsetsToTxn
//	─────────────▶ Empty ─────────────────────────────────▶ Ongoing ◀─┐ more partitions
//	                 ▲                                         │  │  └──┘
//	                 │                          EndTxn(commit) │  │ EndTxn(abort); the timeout or an
//	                 │                  ┌──────────────────────┘  │ InitProducerId fence it first
//	                 │                  ▼                         ▼ (PrepareEpochFence, never logged)
//	                 │            PrepareCommit              PrepareAbort ◀── EndTxn(abort) in Empty
//	                 │                  │ markers                 │ markers     (version 2 only)
//	                 │                  ▼                         ▼
//	                 │            CompleteCommit             CompleteAbort
//	                 │                  │                         │
//	                 └──────────────────┴── InitProducerId ───────┘ (AddPartitions: to Ongoing)
//
//	Empty, CompleteCommit, CompleteAbort ── transactional.id.expiration.ms ──▶ Dead (a tombstone; removed)
//
// Each transition is prepared (the metadata's pending state set: other
// requests get CONCURRENT_TRANSACTIONS), logged, and applied only once the
// Log acknowledges its record. EndTxn logs PrepareCommit/PrepareAbort,
// answers the client, sends the markers (MarkerChannel) — with the
// completion pending meanwhile — and logs CompleteCommit/CompleteAbort
// once every partition has its marker. A coordinator that loads a
// partition (LoadPartition, at a new coordinator epoch: the partition's
// leader epoch) finds there every transaction's last logged state: it
// sends again the markers of those in PrepareCommit/PrepareAbort and
// completes them; an Ongoing one times out as usual.
//
// Invariants (under Coordinator.mu):
//
//  1. A transactional id's state is exactly its last record the Log
//     acknowledged: a transition is applied only after its record is
//     durable (acks=all on a cluster), and a coordinator that lost or
//     reloaded its partition (another coordinator epoch) applies nothing
//     of what it had in flight.
//  2. At most one transition per transactional id is in flight (pending).
//  3. A producer id and epoch are handed out at most once per
//     transactional id: every InitProducerId bumps the epoch (or moves to
//     a fresh producer id), so an older producer of the id is fenced
//     (PRODUCER_FENCED at the coordinator, INVALID_PRODUCER_EPOCH at the
//     partitions it writes to once a marker or a newer batch raised the
//     epoch there).
//  4. Markers are written with the coordinator epoch of the partition's
//     leader epoch: a zombie coordinator's markers are refused by the data
//     partitions (TRANSACTION_COORDINATOR_FENCED).
//  5. A transaction is CompleteCommit/CompleteAbort only after every one
//     of its partitions acknowledged its marker (or no longer exists).
//
// # __transaction_state records
//
// An id maps to partition abs(javaStringHash(id)) mod NumPartitions, as in
// Kafka. Key and value are Kafka's (TransactionLogKey, TransactionLogValue;
// big-endian, string = int16 length + bytes):
//
//	key:      int16 0 (the record type) | string transactional_id
//
//	value v0: int16 0 | int64 producer_id | int16 producer_epoch |
//	          int32 transaction_timeout_ms | int8 transaction_status |
//	          [partitions] (int32 count, -1: null) of
//	              string topic | [int32 partition] (int32 count)
//	          | int64 last_update_ms | int64 start_ms
//
//	value v1: the same fields in the flexible encoding (compact arrays and
//	          strings: uvarint length+1, 0 null; tagged fields after each
//	          struct), with tags 0 previous_producer_id (int64, default
//	          -1), 1 next_producer_id (int64, -1), 2
//	          client_transaction_version (int16, 0)
//
// transaction_status is the State's id; partitions are null in Empty. A
// null value (tombstone) removes the id. The coordinator writes v1 under
// transaction version 2 and v0 otherwise (as Kafka); it reads both, so
// kafka-dump-log and Kafka's tools read what it writes.
//
// # Goroutines
//
// Every exported method is safe for concurrent use. Callbacks run with no
// lock held: on the caller's goroutine, a Clock timer's, or the goroutine
// that completes a Log append or a marker request. ProducerIDs is called
// with no lock held (it may block).
//
// # Differences from Apache Kafka
//
//   - Markers go one request per transaction and leader (Kafka batches the
//     markers of many transactions per broker).
//   - A marker the partition refuses as corrupt or too large is given up
//     (logged) rather than halting the marker thread.
//   - Under transaction version 2 an abort in Empty succeeds and bumps
//     the epoch (newer Kafka's rule; franz-go relies on it).
//   - ListTransactions' id pattern is an RE2 expression matched against
//     the whole id (Kafka: a Java regular expression).
//   - The coordinator's appends wait for the in-sync replicas up to
//     ReplicatedLog's timeout (Kafka: the transaction's timeout).
//
// How the broker wires this package: WIRING.md in this directory.
package txn
