// Package chaos holds the fault harness's history and its checker: the record of what
// the clients of a run did and saw, and the judgement of whether a Kafka-compatible log
// could have produced it. It imports nothing of the project (the harness drives a
// cluster from outside: over the Kafka wire, with process signals, network namespaces
// and the file system); its subpackages do the driving:
//
//	tools/chaos            history (this file's package), checker, linearizability
//	tools/chaos/cluster    N `samsa serve` processes: configs, ports, namespaces, signals
//	tools/chaos/nemesis    the seeded fault schedule and the faults themselves
//	tools/chaos/workload   the queue and transactional workloads: clients that record
//	tools/chaos/report     verdict, anomaly table, counts, HTML page with SVG charts
//	tools/chaos/runner     one run end to end: start, load, faults, quiet, check, report
//
// # History
//
// A history is a JSON-lines file: a header line, then one line per completed
// operation, in completion order (ids increase in that order):
//
//	{"header":{"version":1,"topic":"chaos","partitions":4,"seed":7,...}}
//	{"id":1,"proc":"p0","f":"send","st":"ok","s":1200,"e":5400,"w":...,"seq":1,"p":2,"o":0,"v":"p0-1"}
//	{"id":2,"proc":"a0","f":"poll","st":"ok","s":900,"e":6100,"recs":[[2,0,"p0-1"]],"prods":["3/0"]}
//	{"id":3,"proc":"g1","f":"commit","st":"ok","g":"chaos-g","offs":{"2":1}}
//	{"id":4,"proc":"nemesis","f":"fault","st":"ok","s":9e9,"e":14e9,"fault":{"kind":"kill",...}}
//
// Times: "s" and "e" are nanoseconds of the harness's monotonic clock since the run
// started (the interval in which the operation took effect, if it did); "w" is the
// wall clock (Unix ns) at "s". "st" is ok (it happened, with this result), fail (it
// certainly did not happen) or info (unknown: a send that timed out may or may not be
// in the log). Values are unique per run ("<proc>-<n>"), so a value names the send
// that wrote it.
//
// # What the checker reports
//
// With "read" meaning seen by any poll of any consumer (group members, assigned
// consumers, the final drain), and the version order of a partition being the set of
// offsets known to hold a record (acknowledged or read):
//
//	lost                 acknowledged, and not returned by the final drain though it read
//	                     the partition to its end offset (so gone from the log, whether or
//	                     not readers saw it before); without a complete final drain:
//	                     never read, though a later offset of its partition was
//	unseen               acknowledged, never read, nothing after it read, no complete final
//	                     drain of its partition
//	duplicate            one value at two positions (partition, offset), acks included;
//	                     where the readers saw the batches' producers, the detail says
//	                     whether both copies carry one producer id and epoch (a retry the
//	                     broker did not dedupe), one id at two epochs (the client wrote
//	                     it again under a new epoch) or two ids
//	inconsistent-offsets two values at one position, across acks and readers
//	phantom              a value read that no producer sent
//	future-read          a value read by a poll that ended before its send began
//	nonmonotonic-send    one producer's acknowledged offsets in a partition not
//	                     increasing in the order it sent them
//	nonmonotonic-poll    a consumer reads an offset at or below one it already read in the
//	                     same partition, with no assignment change between
//	poll-skip            a consumer's consecutive reads of a partition jump over offsets
//	                     that hold records
//	realtime-order       a send acknowledged at a lower offset than a send to the same
//	                     partition that had completed before it was invoked
//	commit-backwards     a group's committed offset for a partition lower than one
//	                     committed (successfully) before that commit began; or a member
//	                     that resumes a newly assigned partition below an offset committed
//	                     before the assignment
//	liveness-send        after the last fault healed, a send outstanding longer than the bound
//	liveness-read        after the last fault healed, an acknowledged value a reader (an
//	                     assigned consumer, or a group as a whole) took longer than the
//	                     bound to read, or never read
//	nonlinearizable      porcupine found no linearization of a sampled window of a
//	                     partition's log against the model of an append-only log
//	unsafe-election      the nemesis saw a partition led by a replica that lacks
//	                     committed records (kill-replicas: the replica that left the
//	                     ISR first, restarted while every other replica is down or
//	                     paused)
//	eligible-after-crash kill-replicas saw a replica it killed (SIGKILL), restarted while
//	                     the last in-sync one is paused, still an eligible leader
//	                     replica, or elected: its registration names no previous
//	                     broker epoch (it may have lost records)
//
// The transactional workload (workload/txn.go) writes to a topic of its own: "txn"
// ops (one per transaction, its records and its outcome: ok committed, fail aborted,
// info unknown) and "txn-poll" ops (read_committed consumers, and the final
// read_committed drain, process final-txn). On them (check_txn.go):
//
//	aborted-read         a read_committed poll returned a record of an aborted transaction
//	txn-lost             a record of a committed transaction the final drain did not return
//	txn-partial          the final drain returned some but not all records of one
//	                     transaction (whatever its outcome)
//	G0                   a cycle of ww and real-time edges among committed transactions
//	                     that no execution allows (check_txn_graph.go: a transaction's
//	                     record ordered before one of a transaction that had committed
//	                     before it began)
//	G1c                  such a cycle with a wr edge in it (a consume-transform-produce
//	                     transaction's reads, recorded in its "txn" op): cyclic
//	                     information flow
//
// with duplicate, inconsistent-offsets and phantom judged on that topic too. A cycle
// of ww edges alone among concurrent transactions (Elle's G0) is allowed by Kafka,
// which appends a transaction's records as they are produced: it is counted, not
// reported.
//
// Beside the clients, the runner's replica monitor (runner/replicas.go) reads every
// few hundred milliseconds each live node's Metadata (the ISR per partition), each
// node's log end offsets and metadata offset (its admin listener's /metrics) and each
// leader's high watermark (ListOffsets), and records what it finds as "replicas" ops
// (check_replicas.go):
//
//	isr-behind-hw        a replica seen out of the ISR and then in it again (listed by a
//	                     majority of the nodes and left out by none, from images at least
//	                     as new as the one it was missing from) later shows a log end below
//	                     a high watermark observed before the answer that left it out: it
//	                     was counted in the ISR without records the HW had passed, so the
//	                     next leader failure could lose them
//
// On a secured cluster (runner --secure: SASL_SSL, SCRAM-SHA-512, ACLs; check_auth.go):
//
//	auth-failure         outside every fault's window, a client operation failed on
//	                     authentication, TLS or authorization, or a client or a node
//	                     logged a failed authentication ("auth-failed" events)
//
// Each anomaly names the partition, offset, value, process, time and operation ids.
package chaos
