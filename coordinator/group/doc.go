// Package group owns the group coordinator: the classic membership state machine
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the consumer groups of KIP-848
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe: consumer.go, consumer_reconcile.go),
// the membership of share groups (KIP-932, share.go), the streams groups of KIP-1071
// (StreamsGroupHeartbeat, StreamsGroupDescribe: streams*.go), committed offsets, and
// the records the coordinator keeps in the internal compacted topic __consumer_offsets.
//
// The coordinator does no network I/O. Requests arrive as kmsg request structs and
// answers leave through callbacks, so a join that must wait for the rest of the group
// simply keeps its callback until the rebalance completes. Time comes from an injected
// Clock, so every timeout (session, rebalance, pending sync, initial rebalance delay,
// offset expiry) can be driven deterministically by a test. Durability is behind the
// Log interface: "append these records to partition p, tell me when durable" and
// "replay partition p"; ReplicatedLog implements it over this broker's replicas of
// __consumer_offsets (coordinator/statelog: the leader's append with acks=all).
// The default Clock, WheelClock, keeps every timer in the purgatory's hierarchical
// timing wheel; tests inject a fake clock.
//
// # Group states
//
//	               join                      all joined / timeout
//	+-------+  -------------->  +--------------------+  ------------->  +---------------------+
//	| Empty |                   | PreparingRebalance |                  | CompletingRebalance |
//	+-------+  <--------------  +--------------------+  <-------------  +---------------------+
//	   |      no member rejoined     ^        ^        member join/leave/    | leader's SyncGroup
//	   |                             |        |        session expiry        v   stored
//	   | delete / offsets expired    |        +-------------------------  +--------+
//	   v                             +----------------------------------  | Stable |
//	+------+                           member join/leave/session expiry   +--------+
//	| Dead |
//	+------+
//
// Invariants kept by *group (under group.mu):
//
//  1. generation increases by one each time a rebalance completes, also to Empty.
//  2. In CompletingRebalance and Stable the leader is a member and protocol is set.
//  3. A member has at most one parked join callback and one parked sync callback.
//  4. A static member's instance id maps to exactly one member id (staticMembers).
//  5. Offsets in memory are exactly those whose records the Log acknowledged.
//
// # Modern groups
//
// Consumer, share and streams groups are built on one core (modern.go,
// modern_heartbeat.go, modern_records.go), as Kafka's ModernGroup and
// ModernGroupMember: members with member epochs, session and rebalance timers; the
// group epoch and the target assignment of an assignment epoch; the heartbeat's path
// (members joining, static members, leaving, the epoch fence, reconciliation towards
// the target); describes; the records, their tombstones and their replay. Each
// protocol supplies its rules (consumerRules, shareRules, streamsRules) and keeps its
// own assignor, subscription, share-partition state or topology in its files.
//
// # Consumer groups (KIP-848)
//
// A group id names one group of one kind: classic, consumer or share. Consumer
// groups' members heartbeat with their member epoch; the coordinator keeps the group
// epoch (bumped when a subscription, or the partitions of a subscribed topic, change:
// SetTopics hands it the cluster's topics), computes the target assignment of that
// epoch with a server assignor (assignor.go: uniform, range) and moves each member
// towards its target on its heartbeats (consumer_reconcile.go):
//
//	           new target: partitions to give up        member's heartbeat no longer
//	+--------+  ----------------------------->  +------------+  lists them     +------------+
//	| STABLE |                                  | UNREVOKED  |  ------------>  | UNRELEASED |
//	+--------+  <-----------------------------  | (same      |                 | (new epoch,|
//	    ^        nothing to give up, all free   |  epoch)    |                 |  waiting)  |
//	    |                                       +------------+                 +------------+
//	    +----------------------------------------------------------------------------+
//	                      the partitions its target has are all released
//
// A member that does not revoke within its rebalance timeout, or does not heartbeat
// within its session timeout, is fenced (removed, group epoch bumped). The session
// timeout and the heartbeat interval handed out are the group's own where it has them
// (Config.GroupSettings: its GROUP configs, read at each heartbeat), else
// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms; the same
// holds for share groups' share.* pair.
// Group states: Empty, Assigning (group epoch > assignment epoch), Reconciling (some
// member not at the assignment epoch or not STABLE), Stable. Invariants are listed on
// modernGroup (modern.go) and consumerState (consumer.go).
//
// Classic and consumer groups share the id space. An empty group converts when a
// member of the other protocol arrives (offline migration), keeping its committed
// offsets; a classic group with members answers a ConsumerGroupHeartbeat
// GROUP_ID_NOT_FOUND, a consumer group with members answers a JoinGroup
// INCONSISTENT_GROUP_PROTOCOL. Not done: Kafka 4's online migration (a classic member
// joining a consumer group with members, served through JoinGroup/SyncGroup as a
// member of the consumer group, and the upgrade of a classic group with members);
// rack-aware assignment. OffsetCommit v9+ by a consumer-group member carries its member epoch
// (offsets.go: validateConsumerCommitLocked); OffsetFetch v9+ too.
//
// # Share groups (KIP-932)
//
// share.go holds a share group's membership half: ShareGroupHeartbeat and
// ShareGroupDescribe over the coordinator (the "simple" assignor, member epochs,
// sessions), its records (types 9 to 14) and their replay; net/kafka serves them
// unless group.share.enable is false. Which records a member holds (the share-partition state:
// start offset, in-flight records, acquisition locks, delivery counts) and its durable
// store, __share_group_state, are coordinator/share's. ShareGroupTopics and
// ShareGroupEmpty serve the share-group offset admin APIs (net/kafka 90-92).
// share_state_init.go initializes the state of the partitions a share group
// subscribes to at their share coordinators (Config.ShareState:
// InitializeShareGroupState) and records them in its ShareGroupStatePartitionMetadata;
// ShareStatePartitions lists them for DeleteGroups, which deletes their state first
// (net/kafka). ShareGroupDeleted is not wired.
//
// # Streams groups (KIP-1071)
//
// A Kafka Streams application with group.protocol=streams is a streams group. Its
// members heartbeat with their member epoch and process id; the first to join brings
// the topology (subtopologies with their source, repartition and changelog topics and
// co-partition groups: streams_topology.go), which the coordinator configures against
// the cluster's topics (SetTopics): repartition and changelog topics get the partition
// counts the topology implies, and those missing are handed to the broker to create
// (MISSING_INTERNAL_TOPICS); missing source topics (MISSING_SOURCE_TOPICS) or internal
// topics of another count (INCORRECTLY_PARTITIONED_TOPICS) leave the group without
// tasks. The group epoch moves when a member joins or leaves, changes its process,
// rack, client tags or topology epoch, when the topology or its topics change, when the
// topology becomes valid, or when the standby count (streams.num.standby.replicas)
// changes; a new target assignment is then computed by the sticky task assignor
// (streams_assignor.go: active tasks balanced and kept where they were, standbys never
// on their active's process) and each member reconciled towards it, revoking before
// assigning, role by role (streams_reconcile.go: the states of consumer groups,
// UNREVOKED_TASKS and UNRELEASED_TASKS). A task is held back from a member while
// another member holds it active, or while its own process still holds the task in
// another role. Static members (an instance id; epoch -2 leaves for now) keep their
// tasks while away. A streams group keeps the classic state at stateStable (stateDead
// once dropped); its own states are Empty, NotReady (no topology validated against the
// topics), Assigning, Reconciling and Stable. OffsetCommit v9+ by a member carries its
// member epoch, which must be the member's (streams_offsets.go). An empty classic
// group becomes a streams group on the first streams join, and an empty streams group a
// classic group on a JoinGroup (offline migration), keeping the committed offsets.
// Not built: warm-up tasks, rack-aware standby placement, source topic regular
// expressions, the assignment interval, topology descriptions.
//
// # __consumer_offsets records
//
// A group maps to partition abs(javaStringHashCode(group)) mod NumPartitions, as in
// Apache Kafka, so both agree on where a group lives. Keys and values use Kafka's own
// schemas (big-endian; string = int16 length + bytes, nullable string length -1 = null,
// bytes = int32 length + bytes):
//
//	OffsetCommitKey   (key version 0 or 1)
//	+---------+--------------+--------------+-----------------+
//	| int16 v | string group | string topic | int32 partition |
//	+---------+--------------+--------------+-----------------+
//
//	GroupMetadataKey  (key version 2)
//	+---------+--------------+
//	| int16 2 | string group |
//	+---------+--------------+
//
//	OffsetCommitValue
//	v0: int16 v | int64 offset | string metadata | int64 commit_ts
//	v1: int16 v | int64 offset | string metadata | int64 commit_ts | int64 expire_ts
//	v2: int16 v | int64 offset | string metadata | int64 commit_ts
//	v3: int16 v | int64 offset | int32 leader_epoch | string metadata | int64 commit_ts
//	v4: v3 in the flexible encoding (compact strings, tagged fields)
//
//	GroupMetadataValue (v0..v4; v4 is v3 in the flexible encoding)
//	+---------+---------------------+------------------+----------------------+
//	| int16 v | string protocol_type| int32 generation | nullable protocol    |
//	+---------+---------------------+------------------+----------------------+
//	| nullable leader | int64 current_state_timestamp (v2+) | [members]         |
//	+-----------------+-------------------------------------+-------------------+
//	member: string member_id | nullable group_instance_id (v3+) | string client_id |
//	        string client_host | int32 rebalance_timeout (v1+) | int32 session_timeout |
//	        bytes subscription | bytes assignment
//
// Consumer and share groups' records (key types 3 to 16) are drawn in
// schema_consumer.go: Kafka 4.0's layouts, so either coordinator reads the other's.
// Streams groups' records (key types 17 to 23) are drawn in schema_streams.go: Kafka
// 4.2's layouts.
//
// A record with a null value (a tombstone) deletes its key: an offset, or a group.
// The coordinator writes OffsetCommitValue v3 (v1 when the commit carries an explicit
// retention) and GroupMetadataValue v3; it reads every version above. Records are
// framed in record batches v2 by the engine's codec (engine.AppendRecords,
// engine.ForEachRecordInBatches; engine/doc.go draws the batch).
//
// # Concurrency and lock order
//
// Coordinator.mu guards the group map and partition states; group.mu guards one
// group. group.mu may be held while taking Coordinator.mu, never the reverse.
// Callbacks (answers) are always invoked with no lock held.
package group
