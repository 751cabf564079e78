// Metadata (key 3), versions 0-13.
//
// Brokers: this node alone, at its advertised host and port. ControllerID (v1+) is this
// node (the single-node controller). ClusterID (v2+) is the broker's cluster id.
// Topics: all topics when the request's list is null (v1+) or empty at v0; else the
// ones asked for, by name or (v10+) by topic id. Each partition reports its leader,
// leader epoch (v7+), replicas and ISR from the metadata image; a partition without a
// leader reports LEADER_NOT_AVAILABLE, one whose log directory is offline
// KAFKA_STORAGE_ERROR with the node in OfflineReplicas (v5+).
//
// Unknown topics: UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID when asked by id;
// invalid names INVALID_TOPIC_EXCEPTION. When auto.create.topics.enable is true and the
// request allows it (always before v4; AllowAutoTopicCreation from v4), an unknown
// topic asked by name is created with num.partitions and default.replication.factor.
//
// Differences from Apache Kafka: an auto-created topic is reported at once with its
// partitions and no error (Kafka answers LEADER_NOT_AVAILABLE until the leader is
// elected; here the node leads at once). Authorized operations are not computed
// (INT32_MIN: "not requested/unknown"), as there is no authorizer.
package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine"
)

func init() {
	register(API{Key: 3, MinVersion: 0, MaxVersion: 13, Handle: handleMetadata})
}

const authorizedOpsUnknown = -2147483648

func handleMetadata(b *Broker, r *Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	v := r.Header.Version
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: b.cfg.Host, Port: b.cfg.Port, Rack: b.cfg.Rack}}
	resp.ClusterID = &b.cfg.ClusterID
	resp.ControllerID = b.cfg.NodeID
	resp.AuthorizedOperations = authorizedOpsUnknown

	im := b.meta.Image()
	offline := b.offlineDirs()
	all := req.Topics == nil || (v == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range im.Topics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t, offline))
		}
		r.Respond(resp)
		return
	}
	allowAuto := v < 4 || req.AllowAutoTopicCreation
	var used int32 // partitions auto-created by this request
	for _, rt := range req.Topics {
		var t *metadata.TopicImage
		var ok bool
		switch {
		case rt.Topic == nil || *rt.Topic == "":
			if rt.TopicID == ([16]byte{}) {
				resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: kerr.InvalidTopicException.Code, AuthorizedOperations: authorizedOpsUnknown})
				continue
			}
			if t, ok = im.TopicByID(metadata.UUID(rt.TopicID)); !ok {
				resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{TopicID: rt.TopicID, ErrorCode: kerr.UnknownTopicID.Code, AuthorizedOperations: authorizedOpsUnknown})
				continue
			}
		default:
			name := *rt.Topic
			if t, ok = im.Topic(name); !ok {
				code := kerr.UnknownTopicOrPartition.Code
				if validTopicName(name) != nil {
					code = kerr.InvalidTopicException.Code
				} else if allowAuto {
					created, err := b.AutoCreateTopic(name, &used)
					if err == nil {
						t, ok = created, true
					} else {
						code = errCode(err)
					}
				}
				if !ok {
					resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: code, AuthorizedOperations: authorizedOpsUnknown})
					continue
				}
			}
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t, offline))
	}
	r.Respond(resp)
}

// metadataTopic describes t; offline lists the log directories that failed.
func (b *Broker) metadataTopic(t *metadata.TopicImage, offline []string) kmsg.MetadataResponseTopic {
	name := t.Name
	mt := kmsg.MetadataResponseTopic{
		Topic: &name, TopicID: t.ID, IsInternal: isInternalTopic(t.Name),
		AuthorizedOperations: authorizedOpsUnknown,
		Partitions:           make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions)),
	}
	for i, p := range t.Partitions {
		mp := kmsg.MetadataResponseTopicPartition{
			Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR,
		}
		switch {
		case p.Leader < 0:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case len(offline) > 0 && p.Leader == b.cfg.NodeID && b.logOffline(t.Name, int32(i), offline):
			mp.ErrorCode = kerr.KafkaStorageError.Code
			mp.OfflineReplicas = []int32{b.cfg.NodeID}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offlineSnapshot is the set of failed log directories at a time.
type offlineSnapshot struct {
	at   time.Time
	dirs []string
}

// offlineDirs lists the log directories that failed (usually none). The engine only
// reports them with per-log statistics (DirStats, O(logs)), so the answer is cached
// for a second rather than computed per Metadata request.
func (b *Broker) offlineDirs() []string {
	now := time.Now()
	if s := b.offline.Load(); s != nil && now.Sub(s.at) < time.Second {
		return s.dirs
	}
	var out []string
	for _, d := range b.eng.DirStats() {
		if d.Err != nil {
			out = append(out, d.Path)
		}
	}
	b.offline.Store(&offlineSnapshot{at: now, dirs: out})
	return out
}

// logOffline reports whether the partition's log lives in one of the offline dirs.
func (b *Broker) logOffline(topic string, partition int32, offline []string) bool {
	l := b.eng.Log(engine.TopicPartition{Topic: topic, Partition: partition})
	if l == nil {
		return false
	}
	for _, d := range offline {
		if isUnder(l.Dir(), d) {
			return true
		}
	}
	return false
}
