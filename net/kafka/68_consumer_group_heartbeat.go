// ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848).
//
// The consumer group protocol's one request: a member joins (member epoch 0), keeps
// its session and learns its assignment (its epoch), or leaves (-1; -2 for a static
// member leaving for now). The broker's server-side assignor (uniform or range,
// group.consumer.assignors) computes the target assignment and the member is
// reconciled towards it: partitions to give up are withdrawn first, partitions another
// member still holds are handed out once it released them (see coordinator/group).
// v0: the coordinator names a joining member; v1: the member names itself. The answer
// leaves once the group's records are durable in __consumer_offsets. The heartbeat
// interval it hands out and the session timeout it arms are the group's own
// (consumer.heartbeat.interval.ms, consumer.session.timeout.ms: GROUP configs, read at
// each heartbeat), else group.consumer.heartbeat.interval.ms and
// group.consumer.session.timeout.ms.
//
// Served at group.version 1 (finalized by default from release 4.0) when
// group.coordinator.rebalance.protocols holds "consumer" (Kafka 4's default);
// otherwise UNSUPPORTED_VERSION, as a Kafka broker without the protocol (features.go).
// Classic and consumer groups share the group id space: an empty classic group becomes
// a consumer group on its first member (offline migration, as Kafka); a classic group
// with members answers GROUP_ID_NOT_FOUND (Kafka's answer when the online upgrade is
// not done: Samsa does not convert a group with members).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

const consumerGroupHeartbeatKey = 68

func init() {
	register(API{Key: consumerGroupHeartbeatKey, MinVersion: 0, MaxVersion: 1, Handle: handleConsumerGroupHeartbeat, Authz: authz.ConsumerGroupHeartbeat})
}

func handleConsumerGroupHeartbeat(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	}
	if !b.features().consumer {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return
	}
	c.ConsumerGroupHeartbeat(req, r.Header.ClientID, clientHost(r), func(resp *kmsg.ConsumerGroupHeartbeatResponse) { r.Respond(resp) })
}
