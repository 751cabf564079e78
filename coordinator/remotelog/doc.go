// Package remotelog is tiered storage's remote log metadata manager over
// the internal topic __remote_log_metadata: Kafka's
// TopicBasedRemoteLogMetadataManager. Which copies of a partition's segments
// exist in remote storage, and in which state (copy started, copy finished,
// delete started; a finished deletion removes the copy), is kept as Kafka's
// records (records.go) in the metadata partition MetadataPartition picks for
// the user partition, and replayed into a per-partition state (state.go) by
// every broker with a replica of the user partition. A new leader of a user
// partition therefore knows what its predecessor copied, and what it left
// half done.
//
//	leader of tp ─ AddRemoteLogSegmentMetadata / UpdateRemoteLogSegmentMetadata ─▶ Manager
//	   Manager ─ statelog.Append (acks=all) ─▶ __remote_log_metadata-p (p = MetadataPartition(tp))
//	   Manager.ListRemoteLogSegments(tp) ─ sync: replay p's local replica (or
//	        Fetch p from its leader) from where the last sync stopped up to
//	        the high watermark ─▶ state of tp
//
// It reuses the internal topics' machinery of the coordinators: appends and
// replays go through coordinator/statelog (the leader's acks=all append; a
// replay reads the local replica's log). Unlike the coordinators' topics,
// every broker reads a metadata partition (Kafka's consumer of the topic runs
// on every broker), not only its leader, so a state is read on demand, up to
// the high watermark: from whichever local replica there is, or, on a node
// with none (remote.log.metadata.topic.replication.factor under the number
// of brokers), from the partition's leader (Config.Fetch: a Fetch as Kafka's
// consumer sends it, READ_UNCOMMITTED). The Manager keeps its own position
// per metadata partition, so it goes on from where it stopped whichever node
// it reads from: the leader of the moment, found anew at each read, or a
// local replica once there is one that has caught up.
//
// An append to a metadata partition led by another node goes to its leader
// (Config.Forward: a Produce with acks=all, as Kafka's producer of the topic
// sends it) and returns once this node's state holds it.
//
// A deleted partition's RemotePartitionDeleteMetadata records are replayed
// too: PartitionDeletions lists those marked or started and not finished
// in the metadata partitions this node leads, for the remote log manager to
// finish a deletion whose node stopped first.
//
// Sizes replays the records read by a client, not a replica (cmd/samsa's
// topics describe): each partition's finished copies and their bytes.
//
// What is not built: snapshots of the state
// (RemoteLogSegmentMetadataSnapshotRecord) are neither written nor read: a
// node that starts replays each metadata partition it reads from its start,
// as Kafka's ConsumerTask does (it seeks newly assigned metadata partitions
// to their beginning; its snapshot file is not used). A replay is cheap
// beside a snapshot's upkeep: 100,000 records (40,000 copies, 8.9 MB) take
// 61-92 ms on a 2-core machine at its quietest, from the local replica or
// from the leader's log in 1 MiB reads, 0.15-0.55 s under a load average of
// 12-16 (BenchmarkManagerReplay).
//
// Safe for concurrent use; a Manager's lock is never held across an append's
// wait.
package remotelog
