package replication

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// --- the leaders' side: fetch sessions and long polls --------------------------------

// simServer is a node's answer to follower fetches: KIP-227 sessions (when the
// configuration has them), FollowerFetch per partition, the records read from the
// log, and long polls parked until an append or MaxWait.
type simServer struct {
	s        *sim
	n        *simNode
	sessions map[int32]*simSession
	nextID   int32
	parked   []*parkedFetch
}

type simSession struct {
	epoch int32
	parts []*simSessPart
}

type simSessPart struct {
	topic        string
	id           [16]byte
	partition    int32
	offset       int64
	maxBytes     int32
	cur, last    int32
	hw, logStart int64
}

type parkedFetch struct {
	replica int32
	req     *kmsg.FetchRequest
	sess    *simSession
	parts   []*simSessPart
	full    bool
	reply   func(*kmsg.FetchResponse)
	done    bool
}

func newSimServer(s *sim, n *simNode) *simServer {
	return &simServer{s: s, n: n, sessions: map[int32]*simSession{}}
}

func (srv *simServer) fetch(replica int32, req *kmsg.FetchRequest, reply func(*kmsg.FetchResponse)) {
	var sess *simSession
	var parts []*simSessPart
	full := true
	reqParts := func() []*simSessPart {
		var out []*simSessPart
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out = append(out, &simSessPart{topic: t.Topic, id: t.TopicID, partition: p.Partition, offset: p.FetchOffset,
					maxBytes: p.PartitionMaxBytes, cur: p.CurrentLeaderEpoch, last: p.LastFetchedEpoch, hw: -1, logStart: -1})
			}
		}
		return out
	}
	switch {
	case !srv.s.cfg.sessions || req.SessionEpoch == -1:
		parts = reqParts()
	case req.SessionEpoch == 0:
		delete(srv.sessions, req.SessionID)
		srv.nextID++
		sess = &simSession{epoch: 1, parts: reqParts()}
		srv.sessions[srv.nextID] = sess
		parts = sess.parts
	default:
		sess = srv.sessions[req.SessionID]
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		if sess == nil {
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			reply(resp)
			return
		}
		if sess.epoch != req.SessionEpoch {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			reply(resp)
			return
		}
		sess.epoch++
		for _, f := range req.ForgottenTopics {
			for _, p := range f.Partitions {
				sess.parts = slices.DeleteFunc(sess.parts, func(sp *simSessPart) bool { return sp.id == f.TopicID && sp.partition == p })
			}
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				i := slices.IndexFunc(sess.parts, func(sp *simSessPart) bool { return sp.id == t.TopicID && sp.partition == p.Partition })
				if i < 0 {
					sess.parts = append(sess.parts, &simSessPart{topic: t.Topic, id: t.TopicID, partition: p.Partition, hw: -1, logStart: -1})
					i = len(sess.parts) - 1
				}
				sp := sess.parts[i]
				sp.offset, sp.maxBytes, sp.cur, sp.last = p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LastFetchedEpoch
			}
		}
		parts, full = sess.parts, false
	}
	pf := &parkedFetch{replica: replica, req: req, sess: sess, parts: parts, full: full, reply: reply}
	resp, bytes, errs := srv.serve(pf, false)
	if bytes > 0 || errs || req.MaxWaitMillis <= 0 {
		reply(resp)
		return
	}
	srv.parked = append(srv.parked, pf)
	inc := srv.n.inc
	srv.s.after(time.Duration(req.MaxWaitMillis)*time.Millisecond, func() {
		if srv.n.up && srv.n.inc == inc && !pf.done {
			srv.finish(pf)
		}
	})
}

func (srv *simServer) finish(pf *parkedFetch) {
	pf.done = true
	srv.parked = slices.DeleteFunc(srv.parked, func(x *parkedFetch) bool { return x == pf })
	resp, _, _ := srv.serve(pf, true)
	pf.reply(resp)
}

// recheck answers the parked fetches that now have data.
func (srv *simServer) recheck() {
	for _, pf := range slices.Clone(srv.parked) {
		if pf.done {
			continue
		}
		for _, sp := range pf.parts {
			p := srv.n.m.Partition(engine.TopicPartition{Topic: sp.topic, Partition: sp.partition})
			if p != nil && p.Log().LogEndOffset() > sp.offset {
				srv.finish(pf)
				break
			}
		}
	}
}

// serve builds the answer: every partition in a full answer, the changed ones in an
// incremental one. again: a parked fetch completing (FollowerReread: its fetch offsets
// were recorded when it arrived), as net/kafka answers one from its purgatory.
func (srv *simServer) serve(pf *parkedFetch, again bool) (*kmsg.FetchResponse, int, bool) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = pf.req.Version
	if pf.sess != nil {
		for id, ss := range srv.sessions {
			if ss == pf.sess {
				resp.SessionID = id
			}
		}
	}
	total, errs := 0, false
	budget := int(pf.req.MaxBytes)
	for _, sp := range pf.parts {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = sp.partition
		tp := engine.TopicPartition{Topic: sp.topic, Partition: sp.partition}
		p := srv.n.m.Partition(tp)
		if p == nil {
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
		} else {
			fetch := p.FollowerFetch
			if again {
				fetch = p.FollowerReread
			}
			res, err := fetch(pf.replica, pf.req.ReplicaState.Epoch, sp.offset, sp.last, sp.cur, pf.req.Version)
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
			switch {
			case err != nil:
				rp.ErrorCode = simCode(err)
			case res.Diverging:
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
			default:
				limit := min(int(sp.maxBytes), budget)
				if total == 0 {
					limit = max(limit, 1) // at least one batch
				}
				if limit > 0 {
					b, err := srv.n.store.log(tp).read(sp.offset, res.LogEndOffset, limit)
					if err != nil {
						rp.ErrorCode = kerr.OffsetOutOfRange.Code
					} else {
						rp.RecordBatches = b
						total += len(b)
						budget -= len(b)
					}
				}
			}
		}
		if rp.ErrorCode != 0 || rp.DivergingEpoch.EndOffset >= 0 {
			errs = true
		}
		include := pf.full || len(rp.RecordBatches) > 0 || rp.ErrorCode != 0 || rp.DivergingEpoch.EndOffset >= 0 ||
			rp.HighWatermark != sp.hw || rp.LogStartOffset != sp.logStart
		if !include {
			continue
		}
		sp.hw, sp.logStart = rp.HighWatermark, rp.LogStartOffset
		n := len(resp.Topics)
		if n == 0 || resp.Topics[n-1].TopicID != sp.id {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = sp.topic, sp.id
			resp.Topics = append(resp.Topics, t)
			n++
		}
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
	}
	return resp, total, errs
}

func (srv *simServer) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			part := srv.n.m.Partition(engine.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			switch {
			case part == nil:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if err := part.CheckLeader(p.CurrentLeaderEpoch); err != nil {
					rp.ErrorCode = simCode(err)
				} else {
					rp.LeaderEpoch, rp.EndOffset = part.EndOffsetForEpoch(p.LeaderEpoch)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// simCode maps replication's errors to Kafka codes, as the net layer does.
func simCode(err error) int16 {
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrUnknownReplica), errors.Is(err, ErrStaleBrokerEpoch):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, ErrOffsetMovedToTieredStorage):
		return kerr.OffsetMovedToTieredStorage.Code
	case errors.Is(err, ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, ErrTimeout):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// --- producers ---------------------------------------------------------------------

// simClient produces unique values to one partition with acks=all, up to two at a
// time, to the leader the controller names (learnt with a delay; refreshed on errors).
type simClient struct {
	s        *sim
	tp       engine.TopicPartition
	leader   int32
	inflight int
}

func (c *simClient) run(end time.Time) {
	var step func()
	step = func() {
		if !c.s.now.Before(end) || !c.s.chaosOn {
			return
		}
		if c.inflight < 2 {
			c.produceOne()
		}
		c.s.after(time.Duration(2+c.s.rng.IntN(15))*time.Millisecond, step)
	}
	c.s.after(time.Duration(c.s.rng.IntN(10))*time.Millisecond, step)
}

func (c *simClient) produceOne() {
	s := c.s
	if c.leader < 0 {
		c.leader = s.ctrl.part(c.tp).leader
		if c.leader < 0 {
			return
		}
	}
	s.values++
	v := fmt.Sprintf("%s-v%d", c.tp, s.values)
	c.inflight++
	n := s.nodes[c.leader]
	settled := false
	settle := func(err error) {
		if settled {
			return
		}
		settled = true
		c.inflight--
		if err != nil {
			c.leader = -1
		}
	}
	s.after(simProduceTimeout+simRequestTimeout, func() { settle(errSimTimeout) })
	if !n.up {
		settle(ErrNotLeader)
		return
	}
	inc := n.inc
	s.after(s.delay(), func() {
		if !n.up || n.inc != inc {
			return
		}
		s.produceAt(n, c.tp, v, func(err error) {
			s.after(s.delay(), func() { settle(err) })
		})
	})
}

// produceAt runs one acks=all produce on node n, as the net layer does.
func (s *sim) produceAt(n *simNode, tp engine.TopicPartition, v string, reply func(error)) {
	p := n.m.Partition(tp)
	if p == nil {
		reply(ErrNotLeader)
		return
	}
	pr := &Produce{}
	var appendErr error
	pr.Begin(n.m, -1, simProduceTimeout, func() {
		if pr.Len() == 0 {
			reply(appendErr)
			return
		}
		pp := pr.Part(0)
		if pp.Err == nil {
			s.acked(tp, pp.Result.BaseOffset, v, n, pp.epoch)
		} else {
			s.tracef("produce %s=%q on n%d failed: %v", tp, v, n.id, pp.Err)
		}
		reply(pp.Err)
	})
	_, appendErr = pr.Append(p, makeBatch(v))
	pr.Seal()
}
