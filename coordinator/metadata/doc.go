// Package metadata owns the cluster metadata, kept the KRaft way: an append-only log of
// typed records (finalized feature levels, the controller quorum's voters, topics,
// partitions, configs, producer-id blocks, brokers and their fencing, SCRAM
// credentials, ACLs) applied by a
// deterministic state machine (Image.Apply: no I/O, no clock) to an immutable
// in-memory Image. The Store persists such a log under a directory, with
// snapshots, and replays it on start (the single-node layout). On the controller quorum
// (go.etcd.io/raft/v3, docs/CLUSTER.md) a raft entry holds exactly one entry frame, and
// EncodeSnapshot/DecodeSnapshot are the raft snapshot's data.
//
// Record frame (Encode, Decode). Integers are big-endian; a uvarint is
// encoding/binary's; a string is a uvarint length then bytes; a nullable string is a
// uvarint of length+1 (0 = null) then bytes; an []int32 is a uvarint count then the
// values.
//
//	0        4        8     9     10
//	+--------+--------+-----+-----+---------------------------+
//	| length | crc32c | ver | typ | payload                   |
//	+--------+--------+-----+-----+---------------------------+
//	length: uint32, bytes after the crc (2 + payload), at most MaxRecordSize
//	crc32c: Castagnoli CRC of ver, typ and payload
//	ver:    the record type's version: 2 for RegisterBroker and Partition (version 1,
//	        written before the cluster existed, is still read), 3 for RegisterBroker
//	        with features and for Partition with ELR fields, 2 for PartitionChange
//	        with ELR fields and for FeatureLevel, 1 for the others
//	opt []int32: a uvarint of count+1 (0 = nil, "unchanged") then the values
//	tagged: Kafka's tagged fields: a uvarint count, then per field, tags ascending, a
//	        uvarint tag, a uvarint size and that many bytes (here an []int32); only
//	        the tags the version lists, at least one
//	typ  ver payload
//	  0  3  RegisterBroker   version 2's payload, then feature count uvarint (at
//	                         least 1), per feature: name string, min int16, max int16
//	                         (the levels it supports; written only when it has some)
//	  0  2  RegisterBroker   id int32, incarnation id [16]byte, epoch int64,
//	                         endpoint count uvarint, per endpoint: name string, host
//	                         string, port int32, security protocol int16;
//	                         rack nullable string, flags byte (1 fenced, 2 in
//	                         controlled shutdown)
//	  0  1  RegisterBroker   id int32, host string, port int32, rack nullable string
//	                         (read as one PLAINTEXT endpoint, epoch 0, unfenced)
//	  1  1  UnregisterBroker id int32, epoch int64
//	  2  1  Topic            name string, id [16]byte
//	  3  2  Partition        topic id [16]byte, partition int32, replicas []int32,
//	                         isr []int32, removing []int32, adding []int32, leader
//	                         int32, leader epoch int32, partition epoch int32, leader
//	                         recovery state int8
//	  3  3  Partition        version 2's payload, then tagged: 1 ELR, 2 last known
//	                         ELR (Kafka's tags; each present only when not empty)
//	  3  1  Partition        topic id, partition, replicas, isr, leader, leader epoch
//	  4  1  Config           resource int8 (2 topic, 4 broker, 32 group), name string,
//	                         key string, value nullable string
//	  5  1  PartitionChange  topic id [16]byte, partition int32, isr opt []int32, leader
//	                         int32 (-2 unchanged), replicas opt []int32, removing opt
//	                         []int32, adding opt []int32, leader recovery state int8
//	                         (-1 unchanged)
//	  5  2  PartitionChange  version 1's payload, then tagged: 6 ELR, 7 last known
//	                         ELR (Kafka's tags; absent: unchanged)
//	  9  1  RemoveTopic      id [16]byte
//	 15  1  ProducerIDs      broker id int32, broker epoch int64, next producer id int64
//	 17  1  BrokerRegistrationChange  id int32, epoch int64, fenced int8 (-1 unfence,
//	                         0 keep, 1 fence), in controlled shutdown int8 (0 keep, 1 set)
//	 11  1  UserScramCredential  name string, mechanism int8 (1 SHA-256, 2 SHA-512),
//	                         salt bytes, stored key bytes, server key bytes, iterations
//	                         int32  (bytes: a uvarint length then the bytes)
//	 12  1  RemoveUserScramCredential  name string, mechanism int8
//	 12  2  FeatureLevel     name string, level int16 (Kafka's FeatureLevelRecord is
//	                         api key 12, which this log had given
//	                         RemoveUserScramCredential: the version tells them apart)
//	 23  1  AccessControlEntry  id [16]byte, resource type int8, resource name string,
//	                         pattern type int8, principal string, host string,
//	                         operation int8, permission int8 (Kafka's enum values)
//	 24  1  RemoveAccessControlEntry  id [16]byte
//	 28  1  ClearElr         topic name string ("" every topic)
//	134  1  Voters           the controller quorum's members (records_voters.go):
//	                         count uvarint, per member: id int32, directory id
//	                         [16]byte, raft id u64, flags byte (1 learner),
//	                         endpoint count uvarint, per endpoint: name string, host
//	                         string, port u16; kraft.version min int16, max int16
//	                         (Kafka's control record KRaftVoters, type 6, plus 128)
//
// Image.Apply's rules for the security records: a credential has a known mechanism,
// keys of its hash's size and 4096 to 16384 iterations, and is never a password; an ACL
// has a unique non-zero id, a concrete binding (ACLBinding.Validate) that no other ACL
// has; a removal names what exists.
//
// Image.Apply's rules for the cluster's records: broker epochs only grow (see
// RegisterBrokerRecord); a change names the broker's current epoch; a PartitionChange
// bumps the partition epoch, and the leader epoch when the leader changes; a leader is
// in the ISR, the ISR in the replicas and never emptied by a change but at
// eligible.leader.replicas.version 1, where the ELR and last known ELR live (replicas,
// the ELR outside the ISR; a ClearElr empties them, a new partition epoch for each
// partition it changes); that level goes back to 0 only once no partition has an ELR,
// a last known ELR or an empty ISR. A feature level is at least 0
// (0 removes the feature) and metadata.version at least 1; a broker's features name
// each feature once, with a range within 0 and up (features.go).
//
// Entry frame (EncodeEntry, DecodeEntry): the records of one Append, applied all or
// none. A log file is a sequence of entry frames and nothing else.
//
//	+--------+--------+------+---------------+---------------------------+
//	| length | crc32c | 0xE1 | count uvarint | count record frames       |
//	+--------+--------+------+---------------+---------------------------+
//	length, crc32c: as above, over everything after the crc (at most MaxEntrySize)
//
// Directory (Store). Offsets count records from the start of the log.
//
//	LOCK                            flock'd while a Store has the directory open
//	00000000000000000000.log        entries holding records 0, 1, ...
//	00000000000000012000.log        entries from record 12000 on (the active log)
//	00000000000000012000.snapshot   the image after the first 12000 records
//
//	snapshot file:
//	+------------+-----------+---------------------+---------------+--------+
//	| "SMSNAP01" | offset u64| entry frames        | record count  | crc32c |
//	|            |           | (Image.Records)     | u64           | u32    |
//	+------------+-----------+---------------------+---------------+--------+
//	crc32c covers everything before it; written to a .tmp file, synced, renamed.
//
// Replay loads the newest valid snapshot, then applies the log records past it. Every
// Append is fdatasync'ed before its image is published, so only the last entry of the
// last log can be torn; it is truncated. A gap no snapshot covers is ErrCorrupt.
package metadata
