// Package bench is Samsa's load generator: it measures any Kafka-compatible broker
// (Samsa, franz-go's kfake, Apache Kafka, Redpanda, ...) over the Kafka wire protocol
// only. It never imports a broker package of this repository; it is a client.
//
// It owns:
//
//   - workloads (workload.go): OpenMessaging-Benchmark-style YAML files, see workloads/;
//   - the client runner (run.go): kgo producers and consumers, per-second series and
//     whole-run HdrHistograms of publish and end-to-end latency, corrected for
//     coordinated omission on fixed-rate runs;
//   - the raw runner (raw.go): pre-encoded record batches over pipelined Produce
//     requests and undecoded Fetch reads, so the broker, not the client, is the limit;
//     a backlog workload is filled, then drained from offset 0 with no producer;
//   - the tiered catch-up (tiered.go): a backlog on a tiered topic (KIP-405) drained
//     locally, then read again from remote storage once local retention has deleted
//     what was copied, the two rates side by side; a samsa started here gets a
//     versitygw (internal/versitygw) as its object store;
//   - the tiered target (tiered_target.go): samsa@tiered, a samsa with its own
//     versitygw and the run's topics tiered, copying segments throughout a client
//     run, set beside the same samsa without tiering; what it copied in the measured
//     window (segments, bytes, copy lag) is each round's figures, and a round that
//     copied nothing fails;
//   - the read-back (readback*.go, workload tiered-readback): a tiered catch-up
//     whose fill numbers every record and keeps every acknowledgement, read back
//     from offset 0 through a franz-go consumer and kcat, each record checked
//     against the one acknowledged at its offset, with a PASS or FAIL verdict;
//   - targets (target.go): a running broker, a spawned Samsa process, or kfake
//     (in process; as a child process so its CPU can be measured; or as a null
//     broker that stores nothing, to measure the loader's own ceiling);
//   - broker cost (proc_linux.go, usage.go): CPU seconds, peak RSS and the RSS of
//     each second of a broker process, from /proc/<pid> (a spawned target, or --pid)
//     or from its Prometheus /metrics (--admin);
//   - runtime figures (runtime.go): the loader's and the broker's GC pauses,
//     scheduling latency and GC CPU over the measured window, and the note that
//     names what coincides with a spike;
//   - physical limits (limits_linux.go): disk, fdatasync, loopback and sendfile;
//   - profiles (profile.go): CPU and heap profiles pulled from /debug/pprof;
//   - reports (report_*.go): table, JSON and a self-contained HTML page with SVG
//     (sections only with content; the side-by-side table one row per figure and one
//     column per target, with the direction and the best marked), and the verdict
//     lines of --summary;
//   - compare and regress (compare.go, regress.go): A B A B rounds and the gate;
//   - the soak (soak.go): a run's measured window cut into intervals (a minute), each
//     with its own publish histogram and the broker's mean RSS, and the verdict over
//     them: the interval p99's max over median, and the slope of the broker's RSS
//     after the first quarter;
//   - the history (history.go): every compare and regress round's figures, with the
//     commit and the machine, appended to a local JSON lines file, and one figure of
//     it across commits.
//
// Every record the client runner produces carries two timestamps in its value:
//
//	0               8               16                      messageSize
//	+---------------+---------------+-----------------------+
//	| intended send | actual send   | payload (pre-built)   |
//	| unix ns, BE   | unix ns, BE   |                       |
//	+---------------+---------------+-----------------------+
//
// The intended send time is when a fixed-rate schedule said the record should leave;
// latency measured from it includes any stall of the loader or the broker (coordinated
// omission corrected). At max rate the two are the same instant.
package bench
