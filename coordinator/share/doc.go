// Package share owns the share-partition state of share groups (KIP-932, queues for
// Kafka) and its durable store.
//
// A share partition is a share group's view of one topic partition. Its leader (the
// data partition's leader) hands records out one by one to the group's members:
//
//		 log:   ... | done (acked/archived) |  in flight  | never delivered ...
//		                                    ^ start (SPSO) ^ end
//		 in flight: per offset a state (available, acquired, acknowledged, archived),
//		            a delivery count, and while acquired its member and lock deadline
//
//	  - Partition (partition.go) is that state: a pure state machine over offsets, with
//	    no I/O and no clock (every operation takes now), tested with a fake clock.
//	    Acquisition raises the delivery count and sets a lock of
//	    group.share.record.lock.duration.ms; accept acknowledges, release makes the
//	    record available again, reject (and a gap) archives; an expired lock releases;
//	    a record whose delivery count reached group.share.delivery.count.limit is
//	    archived instead of released. At most group.share.partition.max.record.locks
//	    offsets are in flight. The start moves past every done record at the head. A
//	    group's own configs (share.record.lock.duration.ms, share.delivery.count.limit,
//	    share.partition.max.record.locks) stand for these keys for its share
//	    partitions (ManagerConfig.ForGroup), read before each decision.
//	  - Manager (manager.go) holds the share partitions this broker leads: it loads a
//	    share partition's state from its share coordinator the first time it is used
//	    under a leader epoch (a state the group coordinator initialized without a
//	    start gets one by share.auto.offset.reset; one with no state at all, which
//	    Kafka's leader would refuse, is initialized by the leader itself),
//	    runs the lock timers, and writes every durable change back, one write in flight
//	    per share partition, before it tells the caller the change is done.
//	  - Store (store.go) is the share coordinator: the state of every share partition
//	    whose record lives in a partition of __share_group_state this broker leads,
//	    loaded by replaying that partition, written through a group.Log (on a cluster,
//	    the leader's acks=all append on the replicated partition), so a state survives
//	    the loss of its broker. The record layout is drawn in schema.go. Besides Read
//	    and Write (ReadShareGroupState, WriteShareGroupState) it serves the group
//	    coordinator (store_admin.go): Initialize, Delete (a tombstone) and Summary
//	    (InitializeShareGroupState, DeleteShareGroupState,
//	    ReadShareGroupStateSummary); a write to a share partition without state is
//	    refused (ErrUninitialized), as in Kafka.
//
// What is durable: the start offset, the acknowledged and archived records above it,
// and delivery counts as of the last write (every acknowledgement, start move and
// archive writes). Acquisitions are not: after a restart or failover a record that was
// acquired and not acknowledged is available again, as in Kafka.
//
// Differences from Kafka: a write carries the whole state of the share partition
// (Kafka writes deltas, ShareUpdate records, between snapshots); the share
// coordinator fences a write whose state epoch is older than the stored one (an
// initialization by AlterShareGroupOffsets bumps it), or equal with an older
// data-partition leader epoch.
package share
