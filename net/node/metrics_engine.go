package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/engine"
)

// engineCollector exports the engine's state at scrape time (Kafka's JMX names in
// brackets; deploy/METRICS.md has the whole table):
//
//	samsa_log_size_bytes{topic,partition}        bytes of the partition's segments [kafka.log Log Size]
//	samsa_log_start_offset{topic,partition}      [Log LogStartOffset]
//	samsa_log_end_offset{topic,partition}        [Log LogEndOffset]
//	samsa_log_high_watermark{topic,partition}    the high watermark this replica knows
//	samsa_engine_fsync_latency_seconds           histogram of the group commits' fdatasync [LogFlushStats LogFlushRateAndTimeMs]
//	samsa_engine_flush_queue_wait_seconds        a durability waiter's wait for its round to start
//	samsa_engine_flush_wakeup_seconds            an idle flusher's wake-up: first kick to round start
//	samsa_engine_flush_sync_seconds              a round's sync phase (all its files)
//	samsa_engine_flush_release_seconds           a round's release of its waiters (their callbacks included)
//	samsa_engine_flush_round_files               files synced per round
//	samsa_engine_flush_syncs_total{kind}         syncs by file: segment, txnindex, index, epochs, dir; fs: one syncfs for a round
//	samsa_engine_flush_rounds_total{mode}        rounds with work: serial, parallel or syncfs
//	samsa_engine_storage_errors_total{kind}      data-path failures: no_space, eio, io, corrupt_batch, dir_offline
//	samsa_log_dir_offline{dir}                   1 when the directory is offline [LogManager OfflineLogDirectoryCount, per dir]
//	samsa_log_dir_usable_bytes{dir}              free space usable in the directory's file system
//	samsa_engine_recovery_*                      what Open did: logs recovered, bytes truncated, indexes rebuilt, seconds
//
// One scrape walks every log once (atomic loads), so it costs O(partitions).
type engineCollector struct {
	eng *engine.Manager

	size, start, end, hw  *prometheus.Desc
	fsync                 *prometheus.Desc
	flushQueue, flushWake *prometheus.Desc
	flushSync, flushRel   *prometheus.Desc
	flushFiles            *prometheus.Desc
	flushSyncs, flushRnds *prometheus.Desc
	flushFallbacks        *prometheus.Desc
	errors                *prometheus.Desc
	dirOffline, dirFree   *prometheus.Desc
	recLogs, recTrunc     *prometheus.Desc
	recIdx, recSecs       *prometheus.Desc
}

func newEngineCollector(eng *engine.Manager) *engineCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("samsa_"+name, help, labels, nil)
	}
	return &engineCollector{eng: eng,
		size:           d("log_size_bytes", "Bytes of the partition log's segments on disk.", "topic", "partition"),
		start:          d("log_start_offset", "The partition log's first offset.", "topic", "partition"),
		end:            d("log_end_offset", "The partition log's end offset (the next offset to be written).", "topic", "partition"),
		hw:             d("log_high_watermark", "The partition's high watermark as this replica knows it.", "topic", "partition"),
		fsync:          d("engine_fsync_latency_seconds", "fdatasync latency of the log directories' group commits."),
		flushQueue:     d("engine_flush_queue_wait_seconds", "Group commit: a durability waiter's time from its append to the start of the flusher round that releases it (0 if it came while that round ran)."),
		flushWake:      d("engine_flush_wakeup_seconds", "Group commit: an idle flusher's time from the first kick to its round's start (the goroutine wake-up)."),
		flushSync:      d("engine_flush_sync_seconds", "Group commit: a round's sync phase, from its start to the end of its last fdatasync."),
		flushRel:       d("engine_flush_release_seconds", "Group commit: a round's time from the end of its syncs to its last waiter released (the waiters' callbacks, which queue produce answers, included)."),
		flushFiles:     d("engine_flush_round_files", "Group commit: files synced per round (segments, indexes, checkpoints, directories)."),
		flushSyncs:     d("engine_flush_syncs_total", "Group commit: fdatasyncs and fsyncs by file kind, syncfs calls that made a whole round durable (kind fs), and segment files written back with sync_file_range, made durable by their round's one fdatasync (kind writeback).", "kind"),
		flushRnds:      d("engine_flush_rounds_total", "Group commit: rounds that synced logs, by whether the logs were synced one at a time (serial), several at once (parallel), with one syncfs of the file system (syncfs), or written back and made durable by one fdatasync's cache flush (writeback).", "mode"),
		flushFallbacks: d("engine_flush_syncfs_fallbacks_total", "Group commit: syncfs rounds whose syncfs reported a write-back error (of any file of the file system), after which their logs were synced file by file; the directory goes offline only if that fails."),
		errors:         d("engine_storage_errors_total", "Data-path storage failures since start, by kind (each logged once per partition and minute).", "kind"),
		dirOffline:     d("log_dir_offline", "1 when the log directory is offline (an I/O error took it out).", "dir"),
		dirFree:        d("log_dir_usable_bytes", "Bytes still usable in the log directory's file system.", "dir"),
		recLogs:        d("engine_recovery_recovered_logs", "Logs recovered after a crash at start (scanned from the recovery point)."),
		recTrunc:       d("engine_recovery_truncated_bytes", "Bytes cut off at start: torn or corrupt tails."),
		recIdx:         d("engine_recovery_indexes_rebuilt", "Segments whose indexes were rebuilt at start."),
		recSecs:        d("engine_recovery_seconds", "Wall time of the start-up recovery."),
	}
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.start, c.end, c.hw, c.fsync, c.errors, c.dirOffline, c.dirFree,
		c.flushQueue, c.flushWake, c.flushSync, c.flushRel, c.flushFiles, c.flushSyncs, c.flushRnds, c.flushFallbacks,
		c.recLogs, c.recTrunc, c.recIdx, c.recSecs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, l := range c.eng.Logs() {
		tp := l.TopicPartition()
		p := strconv.Itoa(int(tp.Partition))
		gauge(c.size, float64(l.Size()), tp.Topic, p)
		gauge(c.start, float64(l.LogStartOffset()), tp.Topic, p)
		gauge(c.end, float64(l.LogEndOffset()), tp.Topic, p)
		gauge(c.hw, float64(l.HighWatermark()), tp.Topic, p)
	}
	h := c.eng.FsyncHistogram()
	buckets := make(map[float64]uint64, len(h.Buckets))
	for i, b := range engine.FsyncBuckets {
		buckets[b.Seconds()] = h.Buckets[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.fsync, h.Count, h.Sum.Seconds(), buckets)

	fl := c.eng.FlushStats()
	hist := func(d *prometheus.Desc, h engine.Histogram, bound func(i int) float64) {
		b := make(map[float64]uint64, len(h.Buckets))
		for i, n := range h.Buckets {
			b[bound(i)] = n
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, b)
	}
	stage := func(i int) float64 { return engine.StageBuckets[i].Seconds() }
	hist(c.flushQueue, fl.QueueWait, stage)
	hist(c.flushWake, fl.Wakeup, stage)
	hist(c.flushSync, fl.SyncPhase, stage)
	hist(c.flushRel, fl.Release, stage)
	hist(c.flushFiles, fl.Files, func(i int) float64 { return engine.FilesBuckets[i] })
	for k, name := range engine.SyncKindNames {
		ch <- prometheus.MustNewConstMetric(c.flushSyncs, prometheus.CounterValue, float64(fl.Syncs[k]), name)
	}
	ch <- prometheus.MustNewConstMetric(c.flushRnds, prometheus.CounterValue, float64(fl.SerialRounds), "serial")
	ch <- prometheus.MustNewConstMetric(c.flushRnds, prometheus.CounterValue, float64(fl.ParallelRounds), "parallel")
	ch <- prometheus.MustNewConstMetric(c.flushRnds, prometheus.CounterValue, float64(fl.SyncfsRounds), "syncfs")
	ch <- prometheus.MustNewConstMetric(c.flushRnds, prometheus.CounterValue, float64(fl.WritebackRounds), "writeback")
	ch <- prometheus.MustNewConstMetric(c.flushFallbacks, prometheus.CounterValue, float64(fl.SyncfsFallbacks))

	st := c.eng.Stats()
	for _, k := range []struct {
		kind string
		n    int64
	}{{"no_space", st.NoSpace}, {"eio", st.EIO}, {"io", st.OtherIO}, {"corrupt_batch", st.CorruptBatches}, {"dir_offline", st.DirsOffline}} {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(k.n), k.kind)
	}
	for _, ds := range c.eng.DirStats() {
		off := 0.0
		if ds.Err != nil {
			off = 1
		}
		gauge(c.dirOffline, off, ds.Path)
		if ds.UsableBytes >= 0 {
			gauge(c.dirFree, float64(ds.UsableBytes), ds.Path)
		}
	}
	rec := c.eng.Recovery()
	gauge(c.recLogs, float64(rec.RecoveredLogs))
	gauge(c.recTrunc, float64(rec.BytesTruncated))
	gauge(c.recIdx, float64(rec.IndexesRebuilt))
	gauge(c.recSecs, rec.Duration.Seconds())
}
