// FindCoordinator (key 10), versions 0-6.
//
// Answers, for a group, the broker leading its __consumer_offsets partition
// (abs(javaHash(group)) mod the topic's partition count, as Kafka) in the published
// image, at that broker's advertised endpoint (on a SecureListener, its endpoint of
// that listener, as Metadata there); v4+ answers a batch of keys (KIP-699). A
// partition without a leader, or led by a broker the image has fenced or does not
// have (one this broker's Metadata would not list), answers COORDINATOR_NOT_AVAILABLE:
// the coordinator named is one the same image's Metadata lists. Brokers apply the
// metadata log each on its own, so for a moment two brokers may answer from
// different images (right after a coordinator's fencing one may still name it while
// another no longer lists it), as in Kafka. On first use, as
// Apache Kafka does, the broker creates __consumer_offsets through the active
// controller (offsets.topic.num.partitions, default 50; offsets.topic.replication.factor,
// default 3, capped at the live brokers; compacted, never deleted by retention) and
// answers once its image has the topic, from a goroutine of its own. The leader of each
// partition loads it and answers COORDINATOR_LOAD_IN_PROGRESS to group requests
// meanwhile; a broker that is asked for a group it does not coordinate answers
// NOT_COORDINATOR (groups.go).
//
// A transactional id (key type 1) is answered the same way with the leader of its
// __transaction_state partition (abs(javaHash(id)) mod the partition count), the topic
// created on first use (transaction.state.log.num.partitions, default 50;
// transaction.state.log.replication.factor, default 3, capped at the live brokers;
// min.insync.replicas transaction.state.log.min.isr, default 2, capped at the
// replication factor; compacted).
//
// Differences from Apache Kafka: share-group keys get INVALID_REQUEST. Group settings come from the broker keys
// group.initial.rebalance.delay.ms, group.min.session.timeout.ms,
// group.max.session.timeout.ms, group.max.size, offsets.retention.minutes,
// offsets.retention.check.interval.ms, offset.metadata.max.bytes and
// offsets.topic.num.partitions (Kafka's names and defaults).

package kafka

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/txn"
	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/metadatacache"
)

func init() {
	register(API{Key: 10, MinVersion: 0, MaxVersion: 6, Handle: handleFindCoordinator, Authz: authz.FindCoordinator})
}

// clientHost is the member host Kafka reports: "/" and the peer's IP.
func clientHost(r *Request) string {
	if r.Conn == nil || r.Conn.RemoteAddr() == nil {
		return ""
	}
	addr := r.Conn.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "/" + addr
}

func handleFindCoordinator(b *Broker, r *Request) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	if _, ok := b.meta.Image().Topic(txn.StateTopic); !ok && req.CoordinatorType == 1 {
		b.async(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
			defer cancel()
			if err := b.topicMgr.EnsureInternal(ctx, txn.StateTopic); err != nil {
				b.log.Warn("creating __transaction_state", "err", err)
			}
			r.Respond(findCoordinatorResponse(b.route, req, keys))
		})
		return
	}
	if _, ok := b.meta.Image().Topic(group.OffsetsTopic); !ok && req.CoordinatorType == 0 {
		b.async(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
			defer cancel()
			if err := b.topicMgr.EnsureInternal(ctx, group.OffsetsTopic); err != nil {
				b.log.Warn("creating __consumer_offsets", "err", err)
			}
			r.Respond(findCoordinatorResponse(b.route, req, keys))
		})
		return
	}
	r.Respond(findCoordinatorResponse(b.route, req, keys))
}

func findCoordinatorResponse(rt metadatacache.Routing, req *kmsg.FindCoordinatorRequest, keys []string) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	im := rt.View.Image()
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		id, host, port, code := rt.FindCoordinator(im, req.CoordinatorType, key)
		if code == 0 {
			rc.NodeID, rc.Host, rc.Port = id, host, port
		} else {
			rc.ErrorCode = code
			msg := kerr.ErrorForCode(code).Error()
			rc.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = rc.ErrorCode, rc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	return resp
}
