// Package remote is tiered storage's remote storage manager (KIP-405's
// RemoteStorageManager) for any S3-compatible object store: it copies a
// sealed segment of a partition's log with its offset index, time index,
// transaction index, producer snapshot and leader-epoch checkpoint, reads
// the segment back by byte range and each index whole, and deletes a copy.
// It also holds the types Kafka's remote log metadata is made of:
// RemoteLogSegmentId (SegmentID), RemoteLogSegmentMetadata
// (SegmentMetadata) and RemoteLogSegmentState (SegmentState).
//
// It is configured with the keys of Aiven's tiered-storage-for-apache-kafka
// plugin under Kafka's remote.log.storage.manager.impl.prefix (ParseConfig),
// and lays its objects out under that plugin's keys (StorageManager draws
// them). Segments are stored as they are on disk: the plugin's compression
// and encryption are not implemented, and their keys are refused. Its chunk
// cache's keys (fetch.chunk.cache.*) are read here and acted on by the
// remote log manager (replication/tiered), which reads through the cache.
//
// It is a leaf beside the engine: it imports no package of the project (its
// tests write real segments through engine). It keeps no state between
// calls; which copies exist is the remote log metadata's business, kept by
// the caller.
//
// Errors: every failure of the object store is a *StorageError, which
// matches ErrRemoteStorage (Kafka's RemoteStorageException) and one kind:
// ErrRemoteResourceNotFound (Kafka's RemoteResourceNotFoundException),
// ErrBucketNotFound, ErrAccessDenied or ErrTimeout. No call waits for ever:
// a whole call is bounded by storage.s3.api.call.timeout, and each wait of a
// read or a delete (for an answer, for the next bytes of a body) by
// storage.s3.api.call.attempt.timeout.
package remote
