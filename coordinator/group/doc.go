// Package group owns the classic consumer-group coordinator: the membership state
// machine (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets, and the
// records the coordinator keeps in the internal compacted topic __consumer_offsets.
//
// The coordinator does no network I/O. Requests arrive as kmsg request structs and
// answers leave through callbacks, so a join that must wait for the rest of the group
// simply keeps its callback until the rebalance completes. Time comes from an injected
// Clock, so every timeout (session, rebalance, pending sync, initial rebalance delay,
// offset expiry) can be driven deterministically by a test. Durability is behind the
// Log interface: "append these records to partition p, tell me when durable" and
// "replay partition p"; EngineLog implements it over the engine's partition logs.
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
// A record with a null value (a tombstone) deletes its key: an offset, or a group.
// The coordinator writes OffsetCommitValue v3 (v1 when the commit carries an explicit
// retention) and GroupMetadataValue v3; it reads every version above. Records are
// framed in record batches v2 (see batch.go).
//
// # Concurrency and lock order
//
// Coordinator.mu guards the group map and partition states; group.mu guards one
// group. group.mu may be held while taking Coordinator.mu, never the reverse.
// Callbacks (answers) are always invoked with no lock held.
package group
