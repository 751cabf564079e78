package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Sentinel errors. Apply returns them wrapped with detail; check with errors.Is.
var (
	// ErrInvalidRecord: a record is malformed or inconsistent with the image.
	ErrInvalidRecord = errors.New("metadata: invalid record")
	// ErrTopicExists: a TopicRecord names a topic that exists.
	ErrTopicExists = errors.New("metadata: topic exists")
	// ErrUnknownTopic: a record refers to a topic that does not exist.
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	// ErrCorrupt: bytes that fail their checksum or do not parse (Decode, replay).
	ErrCorrupt = errors.New("metadata: corrupt data")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("metadata: store closed")
	// ErrStoreFailed: a write or sync failed; the store refuses further appends because
	// what reached the disk is unknown. Reopen it to recover.
	ErrStoreFailed = errors.New("metadata: store failed")
)

// UUID is a Kafka UUID (a topic id): 16 bytes, on the wire the most significant 8 bytes
// then the least significant 8 bytes, each big-endian.
type UUID [16]byte

// ZeroUUID is Kafka's ZERO_UUID, never a valid topic id.
var ZeroUUID UUID

// MetadataTopicID is Kafka's METADATA_TOPIC_ID (high 0, low 1), reserved for the
// cluster-metadata topic and never given to a user topic.
var MetadataTopicID = UUID{15: 1}

// NewUUID returns a random version-4 UUID that is a valid topic id: not zero, not the
// metadata topic id, and (as Kafka also ensures) its string does not start with '-', so
// it cannot be mistaken for a command-line flag.
func NewUUID() UUID {
	for {
		var u UUID
		_, _ = rand.Read(u[:])  // documented never to fail (it aborts the process instead)
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // IETF variant
		if u.ValidTopicID() && u[0]>>2 != 62 {
			return u
		}
	}
}

// ValidTopicID reports whether u may name a topic (not zero, not the metadata topic id).
func (u UUID) ValidTopicID() bool { return u != ZeroUUID && u != MetadataTopicID }

// String returns u as Kafka prints it: URL-safe base64 of the 16 bytes, no padding.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses the form String returns.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 22 {
		return u, fmt.Errorf("%w: uuid %q: want 22 base64url characters", ErrInvalidRecord, s)
	}
	n, err := base64.RawURLEncoding.Strict().Decode(u[:], []byte(s))
	if err != nil || n != 16 {
		return UUID{}, fmt.Errorf("%w: uuid %q: %v", ErrInvalidRecord, s, err)
	}
	return u, nil
}

// ResourceType is Kafka's config resource type (DescribeConfigs, IncrementalAlterConfigs).
type ResourceType int8

const (
	ResourceUnknown ResourceType = 0
	ResourceTopic   ResourceType = 2
	ResourceBroker  ResourceType = 4
	ResourceGroup   ResourceType = 32 // a group's configs (KIP-848, KIP-932: Kafka's GROUP)
)

func (rt ResourceType) String() string {
	switch rt {
	case ResourceTopic:
		return "topic"
	case ResourceBroker:
		return "broker"
	case ResourceGroup:
		return "group"
	}
	return fmt.Sprintf("resource(%d)", int8(rt))
}

// recordType is the type byte of a record frame. The values follow the api keys of
// Kafka's metadata records where one exists.
type recordType uint8

const (
	typeRegisterBroker           recordType = 0
	typeUnregisterBroker         recordType = 1
	typeTopic                    recordType = 2
	typePartition                recordType = 3
	typeConfig                   recordType = 4
	typePartitionChange          recordType = 5
	typeRemoveTopic              recordType = 9
	typeProducerIDs              recordType = 15
	typeBrokerRegistrationChange recordType = 17
	typeClearElr                 recordType = 28
)

// Record is one metadata change. The set is closed: only this package's record types
// implement it.
type Record interface {
	recordType() recordType
}

// TopicRecord creates a topic. Its partitions follow as PartitionRecords.
type TopicRecord struct {
	Name string
	ID   UUID
}

// Leader recovery states (Kafka's LeaderRecoveryState): a leader elected uncleanly is
// recovering until it has made its log the partition's truth.
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// PartitionRecord creates partition Partition of a topic (it must be the next index:
// partitions are dense) or replaces an existing partition's assignment and leadership
// with exactly what it carries (snapshots). Changes to a live partition are
// PartitionChangeRecords.
type PartitionRecord struct {
	TopicID     UUID
	Partition   int32
	Replicas    []int32
	ISR         []int32
	Removing    []int32 // replicas being removed by a reassignment (a subset of Replicas)
	Adding      []int32 // replicas being added by a reassignment (a subset of Replicas)
	Leader      int32   // -1: no leader
	LeaderEpoch int32
	// PartitionEpoch grows by one with every change of the partition (AlterPartition
	// names the epoch it expects).
	PartitionEpoch      int32
	LeaderRecoveryState int8
	// ELR are the eligible leader replicas (KIP-966): replicas out of the ISR that hold
	// every committed record, because they left it while it was at or below
	// min.insync.replicas and the high watermark has not moved since. LastKnownELR is
	// the last leader of a partition whose ISR and ELR emptied (Kafka keeps the last
	// known leader there). Both are kept only at eligible.leader.replicas.version 1;
	// nil when empty. A record carrying either is written as version 3.
	ELR          []int32
	LastKnownELR []int32
}

// NoLeaderChange in PartitionChangeRecord.Leader keeps the leader.
const NoLeaderChange int32 = -2

// PartitionChangeRecord changes a live partition. A nil slice keeps the field, a
// non-nil empty one clears it (Removing, Adding). Applying it bumps the partition epoch
// by one, and the leader epoch by one when the leader changes (Kafka's rule).
type PartitionChangeRecord struct {
	TopicID             UUID
	Partition           int32
	ISR                 []int32 // nil: unchanged; never empty
	Leader              int32   // NoLeaderChange, -1 (no leader), or a replica in the ISR
	Replicas            []int32 // nil: unchanged
	Removing            []int32 // nil: unchanged
	Adding              []int32 // nil: unchanged
	LeaderRecoveryState int8    // -1: unchanged
	// ELR and LastKnownELR (nil: unchanged; empty: cleared) as in PartitionRecord. A
	// record carrying either is written as version 2.
	ELR          []int32
	LastKnownELR []int32
}

// ClearElrRecord clears the ELR and last known ELR of every partition of topic
// TopicName, or of every topic when it is "" (Kafka's ClearElrRecord, api key 28):
// written when min.insync.replicas changes while ELR is on, as the ELR members were
// chosen against the old value. Each partition it changes takes a new partition
// epoch.
type ClearElrRecord struct {
	TopicName string
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	ID UUID
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil: back to the default) one
// config key of a resource. For ResourceTopic, Name is the topic name and the topic must
// exist; for ResourceBroker, Name is a broker id in decimal, or "" for the cluster-wide
// default; for ResourceGroup, Name is a group id, never empty (the group need not exist:
// Kafka lets a group be configured before its first member joins; DeleteGroups removes
// the configs of a group it deletes).
type ConfigRecord struct {
	Resource ResourceType
	Name     string
	Key      string
	Value    *string
}

// ProducerIDsRecord records that a producer-id block was handed to a broker: ids below
// NextProducerID are taken and will never be handed out again.
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// Security protocols (Kafka's SecurityProtocol ids), as endpoints carry them.
const (
	ProtocolPlaintext     int16 = 0
	ProtocolSSL           int16 = 1
	ProtocolSASLPlaintext int16 = 2
	ProtocolSASLSSL       int16 = 3
)

// Endpoint is one listener a broker registered: its name (PLAINTEXT, INTERNAL, ...), the
// advertised address and the security protocol.
type Endpoint struct {
	Name             string
	Host             string
	Port             int32
	SecurityProtocol int16
}

// RegisterBrokerRecord registers (or re-registers, replacing) a broker.
//
// Epoch is the broker epoch: a registration's epoch must exceed the epoch of the
// broker's current registration and every epoch of the image's registered brokers
// (Image.MaxBrokerEpoch). The controller uses max(MaxBrokerEpoch, committed offset) + 1,
// so that every epoch is at most the offset of its own registration and epochs never
// repeat, unregistrations included. Epoch 0 marks a registration written before broker
// epochs existed (record version 1): it is exempt from the ordering.
type RegisterBrokerRecord struct {
	ID            int32
	IncarnationID UUID
	Epoch         int64
	Endpoints     []Endpoint // at least one; the first is the one Metadata reports by default
	Rack          *string
	// Fenced: a broker registers fenced and is unfenced by the controller once it has
	// caught up with the metadata.
	Fenced               bool
	InControlledShutdown bool
	// Features are the ranges of feature levels the broker supports (Kafka's
	// RegisterBrokerRecord.Features). None: a broker of a build before feature levels,
	// which supports only the levels of a log without them (LegacyMetadataVersion).
	// Written as record version 3; a registration without features keeps version 2's
	// bytes.
	Features []BrokerFeature
}

// UnregisterBrokerRecord removes a broker's registration (Epoch must be its current one).
type UnregisterBrokerRecord struct {
	ID    int32
	Epoch int64
}

// Values of BrokerRegistrationChangeRecord.Fenced, as Kafka's record.
const (
	FenceUnfence int8 = -1
	FenceKeep    int8 = 0
	FenceFence   int8 = 1
)

// BrokerRegistrationChangeRecord fences or unfences a broker, or marks it in controlled
// shutdown. Epoch must be the broker's current epoch.
type BrokerRegistrationChangeRecord struct {
	ID                   int32
	Epoch                int64
	Fenced               int8 // FenceUnfence, FenceKeep or FenceFence
	InControlledShutdown int8 // 0 keep, 1 set (re-registration clears it)
}

func (*TopicRecord) recordType() recordType                    { return typeTopic }
func (*PartitionRecord) recordType() recordType                { return typePartition }
func (*PartitionChangeRecord) recordType() recordType          { return typePartitionChange }
func (*RemoveTopicRecord) recordType() recordType              { return typeRemoveTopic }
func (*ConfigRecord) recordType() recordType                   { return typeConfig }
func (*ProducerIDsRecord) recordType() recordType              { return typeProducerIDs }
func (*RegisterBrokerRecord) recordType() recordType           { return typeRegisterBroker }
func (*UnregisterBrokerRecord) recordType() recordType         { return typeUnregisterBroker }
func (*BrokerRegistrationChangeRecord) recordType() recordType { return typeBrokerRegistrationChange }
func (*ClearElrRecord) recordType() recordType                 { return typeClearElr }

// StringPtr returns &s, for ConfigRecord.Value and RegisterBrokerRecord.Rack.
func StringPtr(s string) *string { return &s }

// ValidTopicName applies Kafka's rule: 1 to 249 characters of [a-zA-Z0-9._-], and
// neither "." nor "..".
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: topic name %q", ErrInvalidRecord, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q: character %q", ErrInvalidRecord, name, c)
		}
	}
	return nil
}
