// ShareGroupHeartbeat (key 76), version 1 (KIP-932; v0 was Kafka 4.0's early access).
//
// A share group member joins (member epoch 0, with its subscribed topic names),
// heartbeats, or leaves (-1), at the group coordinator (the leader of the group's
// __consumer_offsets partition, as for other groups). The coordinator assigns
// partitions with the "simple" assignor (coordinator/group/share.go): a partition may
// go to several members, and a member takes its target at once (share groups have no
// revocation: records, not partitions, are handed out, by each partition's leader).
// The answer leaves once the group's records are durable. A group id held by a
// classic group with state, or by a consumer group, answers GROUP_ID_NOT_FOUND.
//
// Served at share.version 1 (finalized by default, as Kafka 4.2 finalizes it on new
// clusters) unless the node disables share groups (group.share.enable=false);
// otherwise UNSUPPORTED_VERSION and not advertised (features.go). Settings: the group's own
// share.session.timeout.ms and share.heartbeat.interval.ms (GROUP configs, read at
// each heartbeat), else group.share.session.timeout.ms (45000) and
// group.share.heartbeat.interval.ms (5000); group.share.max.size (200).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 76, MinVersion: 1, MaxVersion: 1, Handle: handleShareGroupHeartbeat, Authz: authz.ShareGroupHeartbeat})
}

func handleShareGroupHeartbeat(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	}
	if !b.features().share {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return
	}
	c.ShareGroupHeartbeat(req, r.Header.ClientID, clientHost(r), func(resp *kmsg.ShareGroupHeartbeatResponse) { r.Respond(resp) })
}
