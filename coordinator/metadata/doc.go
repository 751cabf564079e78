// Package metadata owns the cluster metadata, kept the KRaft way: an append-only log of
// typed records (topics, partitions, configs, producer-id blocks, brokers) applied by a
// deterministic state machine (Image.Apply: no I/O, no clock) to an immutable in-memory
// Image. On one node the Store persists the log under the data directory, with
// snapshots, and replays it on start; it is the only source of truth for metadata. The
// next step carries the same entries on a Raft quorum (go.etcd.io/raft/v3): an entry
// frame is exactly what a Raft entry will hold, and Image.Records is a Raft snapshot.
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
//	ver:    1
//	typ  payload
//	  0  RegisterBroker  id int32, host string, port int32, rack nullable string
//	  2  Topic           name string, id [16]byte
//	  3  Partition       topic id [16]byte, partition int32, replicas []int32,
//	                     isr []int32, leader int32, leader epoch int32
//	  4  Config          resource int8, name string, key string, value nullable string
//	  9  RemoveTopic     id [16]byte
//	 15  ProducerIDs     broker id int32, broker epoch int64, next producer id int64
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
