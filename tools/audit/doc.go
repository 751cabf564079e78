// Package audit is `samsa audit`: a correctness auditor to run against a production
// Kafka-compatible cluster (Samsa, Apache Kafka, kfake) for minutes or for days. It
// owns the canary stream it writes, the incremental checker that judges what comes
// back, and the audit's metrics; it talks to the cluster over the Kafka wire only
// (franz-go's kgo and kadm) and imports no broker package.
//
// # What a run does
//
//	             idempotent producer (i) ──┐            ┌── consumer group (read_uncommitted)
//	run ──Send──►                          ├─► topic ──►┤                                     ──Read──► Checker
//	             transactional producer (t)┘            └── assigned consumer (read_committed)
//	             (commits 4 in 5, aborts 1)
//
// In order:
//
//  1. Set-up (Run, run_setup.go): the canary topic (DefaultTopic, samsa-audit-canary;
//     names starting with "__" are internal) is used as it is, or created with 3
//     partitions, replication factor min(3, brokers) and a day's retention. Its end
//     offsets are listed and committed for the run's own group (samsa-audit-<run>), so
//     both readers start exactly where the run's first record will be.
//  2. Production (run_clients.go), once the group member has its partitions (its join
//     is not latency): Rate times a second the idempotent producer (acks=all) sends
//     one record to every partition, and the transactional producer (transactional id
//     samsa-audit-<run>) runs one transaction of one record per partition, committing
//     it, or aborting one in five. Every record carries its run, producer, sequence and
//     send time (record.go).
//  3. Reading: a consumer group member (read_uncommitted) and a read_committed consumer
//     assigned every partition give the checker every record of the run they return.
//  4. Judging: every second the checker's window is judged (Checker.Tick); every
//     ReportInterval a verdict line is printed. When Duration passes or the context
//     ends (SIGINT, SIGTERM), production stops, the readers drain until nothing is
//     owed (Drain at most), the rest is judged (Checker.Finish) and the final verdict
//     printed; the run's group is deleted.
//
// # The checker and tools/chaos's
//
// tools/chaos's checker (chaos.Check) judges a whole recorded history at once: it
// indexes every operation, sorts sends and polls, and needs the final drain to tell
// lost from unseen. An audit that runs for days cannot keep its history, so Checker
// judges the same anomalies incrementally over a sliding window of the records not
// yet resolved (and those resolved within the horizon). It reuses chaos's anomaly
// record (chaos.Anomaly) and kinds where the definitions are the same:
//
//	chaos                      audit (Checker)
//	lost, unseen               lost, unseen: the final drain is replaced by a horizon; a
//	                           record still owed after it is lost if its reader returned a
//	                           later offset of the partition, else unseen
//	duplicate                  duplicated: one record at two offsets, judged per (record,
//	                           offset) while the record is in the window, and from the
//	                           stream's resolved prefix after
//	nonmonotonic-send          reordered: a producer's sequence going backwards in a
//	                           reader's forward reads of a partition
//	aborted-read               aborted-read: the same definition
//	phantom                    phantom: a record of the run its producer never sent
//
// It does not judge what needs the whole history or a controlled run: inconsistent
// offsets across acknowledgements beyond the window, real-time order across producers,
// poll skips, committed offsets going back, liveness bounds after faults, txn-partial
// and txn-lost (which need a final drain of the whole topic), G0/G1c, and
// linearizability (porcupine).
//
// # Memory
//
// The window holds, per producer and partition, the records from the oldest one not
// yet resolved by both readers (or younger than the horizon) to the newest: about
// Rate × partitions × 2 × horizon records while the readers keep up. A reader that
// stops reading makes it grow until Options.MaxWindow per stream; records pushed out
// unresolved count as unseen for good. Latencies go into HDR histograms of fixed size.
package audit
