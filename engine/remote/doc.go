// Package remote is tiered storage's remote storage (KIP-405) beside the
// engine: the types Kafka's remote log metadata is made of,
// RemoteLogSegmentId (SegmentID), RemoteLogSegmentMetadata
// (SegmentMetadata) and RemoteLogSegmentState (SegmentState), and the
// configuration of a remote storage manager for an S3-compatible object
// store, read with the keys of Aiven's tiered-storage-for-apache-kafka
// plugin under Kafka's remote.log.storage.manager.impl.prefix
// (ParseConfig).
//
// It is a leaf beside the engine: it imports no package of the project.
package remote
