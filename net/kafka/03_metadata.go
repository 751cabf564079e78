// Metadata (key 3), versions 0-13.
//
// Brokers: every registered broker that is not fenced, at its endpoint of the
// broker's advertised listener (Config.Listener). ControllerID (v1+) is the active
// controller when it is one of those brokers, else the lowest of them (a client sends
// controller-bound requests there, and every broker forwards them), -1 when there is
// none. ClusterID (v2+) is the broker's cluster id.
//
// Topics: all topics when the request's list is null (v1+) or empty at v0; else the
// ones asked for, by name or (v10+) by topic id. Each partition reports its leader,
// leader epoch (v7+), replicas, ISR and offline replicas (v5+: replicas on brokers
// that are fenced or not registered, and this node's replicas on failed log
// directories). A partition without a leader reports LEADER_NOT_AVAILABLE; one led by
// this node on a failed directory KAFKA_STORAGE_ERROR.
//
// Unknown topics: UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID when asked by id;
// invalid names INVALID_TOPIC_EXCEPTION. When auto.create.topics.enable is true and the
// request allows it (always before v4; AllowAutoTopicCreation from v4), an unknown
// topic asked by name is created through the active controller (a CreateTopics with
// num.partitions and default.replication.factor) and the request is answered, from a
// goroutine of its own, once this broker's image has it: as Kafka does, the answer
// reports such a topic LEADER_NOT_AVAILABLE (or the error its creation met), not its
// new partitions, and the client's next Metadata request finds them. A request for a
// topic that was just deleted therefore never shows it again in the same answer as
// if it had not been.
//
// Authorized operations (KIP-430) are filled in by the SecureListener when an
// authorizer is configured; otherwise INT32_MIN ("not requested/unknown").
//
// An all-topics answer that is the same for every principal (no authorizer, or a super
// user not asking for authorized operations) is encoded once per image and shape and
// served from a cache (03_metadata_cache.go).
//
// An answer that would name as a partition's leader a broker this node has just lost
// (its connections closed by the broker's side or refused) waits up to
// metadatacache.LeaderHold for the controller to fence it; one naming a leader on
// another broker is sent after a second look metadatacache.LeaderSettle (10 ms) later
// (03_metadata_hold.go).

package kafka

import (
	"time"

	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/metadatacache"
)

func init() {
	register(API{Key: 3, MinVersion: 0, MaxVersion: 13, Handle: handleMetadata, Authz: authz.Metadata})
}

// authorizedOpsUnknown is KIP-430's value of an authorized-operations field that was
// not asked for; net/authz fills the field when it is.
const authorizedOpsUnknown = authz.OperationsUnknown

func handleMetadata(b *Broker, r *Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	v := r.Header.Version
	all := req.Topics == nil || (v == 0 && len(req.Topics) == 0)
	switch until, remote := b.leaderHoldUntil(b.meta.Image(), req, all, time.Now()); {
	case !until.IsZero():
		b.holdMetadata(r, req, all, until, 0) // 03_metadata_hold.go
		return
	case remote:
		b.holdMetadata(r, req, all, time.Time{}, metadatacache.LeaderSettle) // a second look
		return
	}
	b.answerMetadata(r, req, all)
}

// answerMetadata answers req (from the cache, after auto-creating its missing topics,
// or from the image).
func (b *Broker) answerMetadata(r *Request, req *kmsg.MetadataRequest, all bool) {
	v := r.Header.Version
	if all && b.respondCachedMetadata(r, req) { // 03_metadata_cache.go
		return
	}
	if !all && (v < 4 || req.AllowAutoTopicCreation) && b.AutoCreateEnabled() {
		var missing []string
		im := b.meta.Image()
		for _, rt := range req.Topics {
			if rt.Topic != nil && *rt.Topic != "" && metadata.ValidTopicName(*rt.Topic) == nil {
				if _, ok := im.Topic(*rt.Topic); !ok {
					missing = append(missing, *rt.Topic)
				}
			}
		}
		if len(missing) > 0 {
			b.async(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
				defer cancel()
				codes := b.topicMgr.AutoCreate(ctx, missing)
				r.Respond(b.metadataResponse(r, req, all, codes))
			})
			return
		}
	}
	r.Respond(b.metadataResponse(r, req, all, nil))
}

// metadataResponse answers req from the current image; created holds the error codes
// of topics this request tried to auto-create.
func (b *Broker) metadataResponse(r *Request, req *kmsg.MetadataRequest, all bool, created map[string]int16) *kmsg.MetadataResponse {
	return b.metadataResponseFrom(b.meta.Image(), r, req, all, created)
}

// metadataResponseFrom is metadataResponse from image im.
func (b *Broker) metadataResponseFrom(im *metadata.Image, r *Request, req *kmsg.MetadataRequest, all bool, created map[string]int16) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.ClusterID = &b.cfg.ClusterID
	resp.AuthorizedOperations = authorizedOpsUnknown
	for _, bi := range im.Brokers() {
		if bi.Fenced {
			continue
		}
		host, port := b.route.EndpointFor(listenerOf(r), bi)
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: bi.ID, Host: host, Port: port, Rack: bi.Rack})
	}
	resp.ControllerID = b.route.AdvertisedController(im)
	offline := b.dirs.Offline()
	if all {
		for _, t := range im.Topics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(im, t, offline))
		}
		return resp
	}
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
			if c, tried := created[name]; tried {
				// Auto-created by this request: LEADER_NOT_AVAILABLE, as Kafka answers.
				if c == 0 {
					c = kerr.LeaderNotAvailable.Code
				}
				resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: c, AuthorizedOperations: authorizedOpsUnknown})
				continue
			}
			if t, ok = im.Topic(name); !ok {
				code := kerr.UnknownTopicOrPartition.Code
				if metadata.ValidTopicName(name) != nil {
					code = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: code, AuthorizedOperations: authorizedOpsUnknown})
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(im, t, offline))
	}
	return resp
}

// metadataTopic describes t; offline lists the log directories that failed.
func (b *Broker) metadataTopic(im *metadata.Image, t *metadata.TopicImage, offline []string) kmsg.MetadataResponseTopic {
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
		for _, id := range p.Replicas {
			if bi, ok := im.Broker(id); !ok || bi.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		localOffline := len(offline) > 0 && slices.Contains(p.Replicas, b.cfg.NodeID) && b.dirs.LogOffline(t.Name, int32(i), offline)
		if localOffline && !slices.Contains(mp.OfflineReplicas, b.cfg.NodeID) {
			mp.OfflineReplicas = append(mp.OfflineReplicas, b.cfg.NodeID)
		}
		switch {
		case p.Leader < 0:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case localOffline && p.Leader == b.cfg.NodeID:
			mp.ErrorCode = kerr.KafkaStorageError.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
