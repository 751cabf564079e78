// Package remotelog is tiered storage's remote log metadata manager over
// the internal topic __remote_log_metadata: Kafka's
// TopicBasedRemoteLogMetadataManager. Which copies of a partition's segments
// exist in remote storage, and in which state (copy started, copy finished,
// delete started; a finished deletion removes the copy), is kept as Kafka's
// records (records.go) in the metadata partition MetadataPartition picks for
// the user partition, and replayed by every replica of that metadata
// partition into a per-partition state (state.go). A new leader of a user
// partition therefore knows what its predecessor copied, and what it left
// half done.
//
//	leader of tp ─ AddRemoteLogSegmentMetadata / UpdateRemoteLogSegmentMetadata ─▶ Manager
//	   Manager ─ statelog.Append (acks=all) ─▶ __remote_log_metadata-p (p = MetadataPartition(tp))
//	   Manager.ListRemoteLogSegments(tp) ─ sync: replay p's local replica from
//	        where the last sync stopped up to its high watermark ─▶ state of tp
//
// It reuses the internal topics' machinery of the coordinators: appends and
// replays go through coordinator/statelog (the leader's acks=all append; a
// replay reads the local replica's log). Unlike the coordinators' topics,
// every replica of a metadata partition replays it (Kafka's consumer of the
// topic runs on every broker), not only its leader, so a state is read on
// demand from whichever local replica there is, up to its high watermark.
//
// An append to a metadata partition led by another node goes to its leader
// (Config.Forward: a Produce with acks=all, as Kafka's producer of the topic
// sends it) and returns once this node's replica holds it.
//
// What is not built: a node with no replica of a metadata partition cannot
// read it (ErrNotReady; Kafka's consumer reads it from the leader, so the
// topic's replication factor bounds where tiered partitions may be led:
// remote.log.metadata.topic.replication.factor covers every broker up to
// three); snapshots of the state (RemoteLogSegmentMetadataSnapshotRecord) are
// neither written nor read.
//
// Safe for concurrent use; a Manager's lock is never held across an append's
// wait.
package remotelog
