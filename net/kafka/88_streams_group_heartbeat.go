// StreamsGroupHeartbeat (key 88), versions 0-1 (KIP-1071, production-ready in Kafka 4.2).
//
// The streams rebalance protocol's one request: a Kafka Streams client with
// group.protocol=streams joins (member epoch 0, with its topology: subtopologies, their
// source, repartition and changelog topics, co-partition groups), heartbeats (its
// epoch, the tasks it owns when they changed) and leaves (-1; -2 for a static member
// leaving for now). The group coordinator configures the topology against the
// cluster's topics, assigns the tasks with the sticky task assignor (active tasks
// balanced and kept where they were, streams.num.standby.replicas standbys never on the
// process of their active task) and moves each member towards its target, revoking
// before assigning (coordinator/group/streams*.go). The answer leaves once the group's
// records are durable in __consumer_offsets; it carries the member's tasks when they
// changed, the endpoint-to-partitions map of Interactive Queries when the member's
// endpoint epoch is behind, and the statuses of the group (STALE_TOPOLOGY,
// MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS,
// SHUTDOWN_APPLICATION). The session timeout it arms and the intervals it hands out
// are the group's own (streams.* GROUP configs, read at each heartbeat), else the
// broker's group.streams.* keys. v1: TopologyDescriptionRequired is always false
// (topology descriptions are not kept: key 93 is not served).
//
// Before the coordinator, as Kafka's KafkaApis: the topics of a topology must be valid
// topic names and no internal topic (STREAMS_INVALID_TOPOLOGY), and with ACLs the
// principal needs READ on the group and DESCRIBE on every topic of the topology
// (authz.StreamsGroupHeartbeat; topologyTopics names them). After it: the internal
// topics the group misses (repartition and changelog topics, with the partition
// counts the topology implies, Kafka Streams' topic configs and the broker's default
// replication factor) are created through the active controller, as CreateTopics is
// forwarded, when the principal may CREATE on the cluster or on those topics
// (authz.CreateDenied); the topics it may not create are named in the
// MISSING_INTERNAL_TOPICS status instead. The answer does not wait for the creation:
// the next heartbeat sees the topics.
//
// Differences from Apache Kafka 4.2: static members (an instance id, epoch -2) are
// served as Kafka 4.4 serves them (4.2 answers INVALID_REQUEST); a member joining with a
// topology of a higher epoch updates the group's, as KIP-1071 describes (4.2 answers
// INVALID_REQUEST "Topology updates are not supported yet"); the metadata hash stored
// in the group's records is Samsa's own function of the same facts. Not built:
// warm-up tasks (none assigned; reported task offsets are not kept), rack-aware standby
// placement, source topic regular expressions (INVALID_REQUEST, as Kafka 4.2), the
// assignment interval (ASSIGNMENT_DELAYED is never reported: a target is computed at
// once).
//
// Served at streams.version 1 (finalized by default, as Kafka 4.2 finalizes it on new
// clusters) when group.coordinator.rebalance.protocols holds "streams" (the default);
// otherwise UNSUPPORTED_VERSION and the key is not advertised (features.go).

package kafka

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/authz"
)

const (
	streamsGroupHeartbeatKey = 88
	streamsGroupDescribeKey  = 89
)

// streamsAPIKeys are the APIs of streams groups, not advertised when they are off.
var streamsAPIKeys = []int16{streamsGroupHeartbeatKey, streamsGroupDescribeKey}

func init() {
	register(API{Key: streamsGroupHeartbeatKey, MinVersion: 0, MaxVersion: 1, Handle: handleStreamsGroupHeartbeat, Authz: authz.StreamsGroupHeartbeat(topologyTopics)})
}

// streamsSettings resolves what streams group id acts on: its own configs, capped to
// the broker's bounds, else the broker's group.streams.* keys, else Kafka's defaults.
func (b *Broker) streamsSettings(id string) group.StreamsSettings {
	l := b.keys.groupLayers(b.meta.Image(), id)
	return group.StreamsSettings{
		SessionTimeout:        l.GroupDuration("streams.session.timeout.ms"),
		HeartbeatInterval:     l.GroupDuration("streams.heartbeat.interval.ms"),
		NumStandbyReplicas:    int(l.GroupInt("streams.num.standby.replicas")),
		MaxSize:               int(l.BrokerInt("group.streams.max.size")),
		AcceptableRecoveryLag: l.GroupInt("streams.acceptable.recovery.lag"),
		TaskOffsetInterval:    l.GroupDuration("streams.task.offset.interval.ms"),
	}
}

// topologyTopics are the topics of a joining member's topology, for the DESCRIBE
// check of authz.StreamsGroupHeartbeat; false when their names are refused before
// (invalidTopologyTopics), as Kafka refuses them before any topic is authorised.
func topologyTopics(t *kmsg.StreamsGroupHeartbeatRequestTopology) ([]string, bool) {
	topics := group.StreamsTopologyTopics(t)
	return topics, invalidTopologyTopics(topics) == ""
}

// invalidTopologyTopics is Kafka's check of a topology's topic names: a message for
// STREAMS_INVALID_TOPOLOGY, "" when they are fine.
func invalidTopologyTopics(topics []string) string {
	var internal, invalid []string
	for _, t := range topics {
		switch {
		case isInternalTopic(t) || t == share.StateTopic:
			internal = append(internal, t)
		case metadata.ValidTopicName(t) != nil:
			invalid = append(invalid, t)
		}
	}
	switch {
	case len(internal) > 0:
		return "Use of Kafka internal topics " + strings.Join(internal, ",") + " in a Kafka Streams topology is prohibited."
	case len(invalid) > 0:
		return "Topic names " + strings.Join(invalid, ",") + " are not valid topic names."
	}
	return ""
}

func handleStreamsGroupHeartbeat(b *Broker, r *Request) {
	req := r.Body.(*kmsg.StreamsGroupHeartbeatRequest)
	fail := func(code int16, msg string) {
		resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		r.Respond(resp)
	}
	if !b.features().streams {
		fail(kerr.UnsupportedVersion.Code, "")
		return
	}
	if msg := invalidTopologyTopics(group.StreamsTopologyTopics(req.Topology)); msg != "" {
		fail(kerr.StreamsInvalidTopology.Code, msg)
		return
	}
	c := b.groupCoordinatorOr(func(code int16) { fail(code, "") })
	if c == nil {
		return
	}
	c.StreamsGroupHeartbeat(req, r.Header.ClientID, clientHost(r), b.streamsSettings(req.Group),
		func(resp *kmsg.StreamsGroupHeartbeatResponse, create []group.StreamsTopicInfo) {
			if len(create) > 0 {
				b.createStreamsTopics(r, resp, create)
			}
			r.Respond(resp)
		})
}

// createStreamsTopics starts the creation of a streams group's missing internal
// topics (Deps.Topics) when the principal may create them all (Kafka: CREATE on the
// cluster, else on each topic); else the refused ones are named in resp's
// MISSING_INTERNAL_TOPICS status.
func (b *Broker) createStreamsTopics(r *Request, resp *kmsg.StreamsGroupHeartbeatResponse, topics []group.StreamsTopicInfo) {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	_, im := b.Image()
	if denied := createDenied(r, im, names); len(denied) > 0 {
		detail := "Unauthorized to CREATE on topics " + strings.Join(denied, ", ") + "."
		found := false
		for i := range resp.Status {
			if s := &resp.Status[i]; s.StatusCode == 3 { // MISSING_INTERNAL_TOPICS
				s.StatusDetail += "; " + detail
				found = true
			}
		}
		if !found {
			resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: 3, StatusDetail: detail})
		}
		return
	}
	b.topicMgr.CreateStreamsTopics(topics)
}
