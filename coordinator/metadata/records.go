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
)

func (rt ResourceType) String() string {
	switch rt {
	case ResourceTopic:
		return "topic"
	case ResourceBroker:
		return "broker"
	}
	return fmt.Sprintf("resource(%d)", int8(rt))
}

// recordType is the type byte of a record frame. The values follow the api keys of
// Kafka's metadata records where one exists.
type recordType uint8

const (
	typeRegisterBroker recordType = 0
	typeTopic          recordType = 2
	typePartition      recordType = 3
	typeConfig         recordType = 4
	typeRemoveTopic    recordType = 9
	typeProducerIDs    recordType = 15
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

// PartitionRecord creates partition Partition of a topic (it must be the next index:
// partitions are dense) or replaces an existing partition's assignment and leadership.
type PartitionRecord struct {
	TopicID     UUID
	Partition   int32
	Replicas    []int32
	ISR         []int32
	Leader      int32 // -1: no leader
	LeaderEpoch int32
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	ID UUID
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil: back to the default) one
// config key of a resource. For ResourceTopic, Name is the topic name and the topic must
// exist; for ResourceBroker, Name is a broker id in decimal, or "" for the cluster-wide
// default.
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

// RegisterBrokerRecord registers (or re-registers, replacing) a broker.
type RegisterBrokerRecord struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

func (*TopicRecord) recordType() recordType          { return typeTopic }
func (*PartitionRecord) recordType() recordType      { return typePartition }
func (*RemoveTopicRecord) recordType() recordType    { return typeRemoveTopic }
func (*ConfigRecord) recordType() recordType         { return typeConfig }
func (*ProducerIDsRecord) recordType() recordType    { return typeProducerIDs }
func (*RegisterBrokerRecord) recordType() recordType { return typeRegisterBroker }

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
