// ShareAcknowledge (key 79), versions 1-2 (KIP-932; v2: KIP-1222's IsRenewAck).
//
// Acknowledges records a share group member holds, without fetching: per partition,
// batches of offsets with one type each (or one per offset): accept, release (made
// available again; archived once the delivery count reached
// group.share.delivery.count.limit), reject (archived), gap (0: the offset holds no
// record; archived), and from v2 with IsRenewAck, renew (the lock starts again). The
// request carries the member's share session epoch on this broker (see ShareFetch):
// it must be the one the session expects (0 is refused: INVALID_SHARE_SESSION_EPOCH),
// or -1, which closes the session after the acknowledgements and releases what the
// member still holds. The answer leaves once the changes are durable in
// __share_group_state (per partition: INVALID_RECORD_STATE for a record the member
// does not hold, INVALID_REQUEST for a malformed batch, NOT_LEADER_OR_FOLLOWER with
// the current leader, REQUEST_TIMED_OUT when the state could not be written).

package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/sharesession"
)

func init() {
	register(API{Key: 79, MinVersion: 1, MaxVersion: 2, Handle: handleShareAcknowledge, Authz: authz.ShareAcknowledge})
}

func handleShareAcknowledge(b *Broker, r *Request) {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	fail := func(code int16) {
		resp := kmsg.NewPtrShareAcknowledgeResponse()
		resp.Version, resp.ErrorCode = req.Version, code
		r.Respond(resp)
	}
	if !b.features().share {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	groupID, member, code := shareMember(req.GroupID, req.MemberID)
	switch {
	case code != 0:
		fail(code)
		return
	case req.ShareSessionEpoch == 0:
		fail(kerr.InvalidShareSessionEpoch.Code)
		return
	}
	renew := req.Version >= 2 && req.IsRenewAck
	var parts []*sharePart
	seen := map[share.Key]bool{}
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: rp.Partition}
			if seen[k] {
				fail(kerr.InvalidRequest.Code)
				return
			}
			seen[k] = true
			p := &sharePart{key: k, hasAcks: true}
			acks, ok := shareAckBatches(rp.AcknowledgementBatches, func(a *kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
			})
			if !ok || len(acks) == 0 {
				p.ackCode = kerr.InvalidRequest.Code
				p.hasAcks = false
			} else {
				p.acks = acks
			}
			parts = append(parts, p)
		}
	}
	sk := sharesession.Key{Group: groupID, Member: member}
	var released []share.Key
	if req.ShareSessionEpoch == -1 {
		ps, code := b.shares.ses.Close(sk)
		if code != 0 {
			fail(code)
			return
		}
		released = ps
	} else if code := b.shares.ses.Check(sk, req.ShareSessionEpoch, time.Now()); code != 0 {
		fail(code)
		return
	}
	b.shares.acknowledge(member, parts, renew, func() {
		b.shares.release(member, released)
		resp := kmsg.NewPtrShareAcknowledgeResponse()
		resp.Version = req.Version
		resp.AcquisitionLockTimeoutMillis = int32(b.shares.mgr.LockDuration(groupID) / time.Millisecond)
		idx := map[[16]byte]int{}
		endpoints := map[int32]bool{}
		for _, p := range parts {
			i, ok := idx[p.key.TopicID]
			if !ok {
				i = len(resp.Topics)
				idx[p.key.TopicID] = i
				t := kmsg.NewShareAcknowledgeResponseTopic()
				t.TopicID = p.key.TopicID
				resp.Topics = append(resp.Topics, t)
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.key.Partition, p.ackCode
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if p.ackCode == kerr.NotLeaderForPartition.Code {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = p.leaderID, p.leaderEpoch
				if p.leaderID >= 0 && !endpoints[p.leaderID] {
					if host, port, rack, ok := b.route.LeaderEndpoint(listenerOf(r), p.leaderID); ok {
						endpoints[p.leaderID] = true
						resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareAcknowledgeResponseNodeEndpoint{NodeID: p.leaderID, Host: host, Port: port, Rack: rack})
					}
				}
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
		r.Respond(resp)
	})
}
