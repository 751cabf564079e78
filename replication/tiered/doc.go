// Package tiered is tiered storage's remote log manager (KIP-405, Kafka's
// RemoteLogManager): for every partition this node leads whose log is
// tiered, it copies the sealed segments to remote storage, records each
// copy in the remote log metadata, lets local retention delete what is
// copied, deletes remote copies by the whole log's retention, and serves
// reads below the local log start from remote storage. It is the
// replication.RemoteLog of the node's replica manager, so handlers reach it
// through the partition handle.
//
//	every remote.log.manager.task.interval.ms, per partition led here with remote.storage.enable:
//	  1. list the copies (Metadata.ListRemoteLogSegments)
//	  2. clean up: a copy left COPY_SEGMENT_STARTED (a leader stopped mid-copy,
//	     here or elsewhere) or DELETE_SEGMENT_STARTED is deleted from the store
//	     and marked DELETE_SEGMENT_FINISHED: never finished late, never listed twice
//	  3. copy: each sealed segment wholly below min(HW, LSO) and past the last
//	     finished copy, oldest first (none with remote.log.copy.disable):
//	       COPY_SEGMENT_STARTED ─▶ CopyLogSegmentData (throttled by
//	       remote.log.manager.copy.max.bytes.per.second) ─▶ still leader at the
//	       same epoch? COPY_SEGMENT_FINISHED, Log.SetRemoteEnd : delete the copy
//	  4. local retention (local.retention.ms / .bytes) runs on the log, which
//	     deletes only copied segments
//	  5. remote retention: the oldest finished copies go while the whole log
//	     (remote copies and the local part not copied) is over retention.bytes,
//	     or older than retention.ms
//
// A tiered partition deleted with its topic (replication.RemoteLog's
// PartitionDeleted) has its copies deleted by the next task, from the store
// and the metadata, on every node that held a replica, as Kafka's
// RemoteLogManager deletes a partition's remote log: DELETE_PARTITION_MARKED
// (written at once), DELETE_PARTITION_STARTED, each copy,
// DELETE_PARTITION_FINISHED in __remote_log_metadata. A deletion left
// unfinished (its node stopped first) is finished by the leader of the
// metadata partition that holds it, when its task next runs.
//
// A follower keeps the whole log's start its leader's fetch answers carry
// (replication's keepLogStart, Kafka's maybeIncrementLogStartOffset), below
// its local log start too, so that a log start DeleteRecords raised there
// outlives its leader.
//
// remote.storage.enable turned off with remote.log.delete.on.disable (KIP-950;
// refused without it, in coordinator/configs): the leader's task deletes the
// copies as a deleted partition's, and the log starts at the local log start.
//
// Only the leader copies and deletes: the task checks the partition's role
// and leader epoch before each step that writes metadata. On a follower the
// task only lists the copies (from the metadata partition's local replica,
// or its leader), so
// that local retention deletes what the leader copied here too (Kafka's
// RLMFollowerTask). Reads (Read) run
// on at most remote.log.reader.threads goroutines at once; each reads the
// copy's offset index (kept in memory for the most recent copies) and one
// byte range of its segment, served from chunks of it kept in a chunk cache
// (Aiven's fetch.chunk.cache.*: MemoryChunkCache, or DiskChunkCache in files
// under fetch.chunk.cache.path, bounded by fetch.chunk.cache.size and
// fetch.chunk.cache.retention.ms; without one, the last 32 chunks of 4 MiB
// in memory), the next ones read ahead (chunks.go, chunkcache.go). A
// read answers its batches as slices of the chunks, each chunk's buffer
// counted (chunkBuf): a buffer is read into again, for a later chunk, once
// the memory cache has dropped its chunk and every answer that holds it is
// written (engine.Buffers.Release), never before. A
// consumer's fetch (Fetch) waits for its read at most remote.fetch.max.wait.ms
// (Kafka's DelayedRemoteFetch: then it gets no records, and the read goes on
// into the cache), and reads nothing while the broker's remote reads are over
// remote.log.manager.fetch.max.bytes.per.second (fetch.go).
//
// An object store that hangs or is down fails each copy and remote read within
// the storage manager's timeouts (rsm.config.storage.s3.api.call.timeout and
// .attempt.timeout): copies wait for the next task, local retention keeps
// what is not copied, a Fetch below the local log start answers
// KAFKA_STORAGE_ERROR (retriable) when the store fails the read, or the
// partition empty without an error after remote.fetch.max.wait.ms when the
// store leaves it hanging (the read goes on into the chunk cache), and
// produce and local reads go on. Tested here (TestObjectStoreHangs,
// TestRemoteFetchMaxWait in net/kafka), against a node (cmd/samsa's
// TestObjectStoreOutage, 4 s outages; `make test-long-tiered`, 30 s), with
// kcat (tests/kcat_tiered.sh) and under the fault harness's objstore-down
// (`make chaos-tiered`).
//
// A follower behind its leader's local log start (new, or wiped) is
// answered OFFSET_MOVED_TO_TIERED_STORAGE, asks the leader for its earliest
// local offset (ListOffsets EARLIEST_LOCAL_TIMESTAMP), starts over there,
// and takes the producer state and leader epoch as of that offset from the
// copy ending right before it (RebuildAuxState, Kafka's
// buildRemoteLogAuxState): it copies only the local part (replication's
// fetcher_tiered.go; TestFollowerOffsetMovedToTieredStorage). A follower of
// a build before that, which sends Fetch v15, is answered
// OFFSET_OUT_OF_RANGE with the local log start instead, and starts over
// there the same way.
package tiered
