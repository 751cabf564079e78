// AlterShareGroupOffsets (key 91), version 0 (KIP-932).
//
// Asked of a share group's coordinator: sets the share-partition start offset of each
// named partition, discarding its in-flight state, by initializing its state afresh
// at the state epoch after the stored one (ReadShareGroupStateSummary, then
// InitializeShareGroupState at the partition's share coordinator, __share_group_state). The group
// must have no members (NON_EMPTY_GROUP otherwise); a group id no group holds becomes
// an empty share group first, as Kafka creates it (franz-go's TestShareGroupOffsetsAdmin
// sets a fresh group's offsets before any member joins); a consumer group, or a classic
// group in use, answers GROUP_ID_NOT_FOUND, a topic or partition the image does not know
// UNKNOWN_TOPIC_OR_PARTITION. With ACLs: READ on the group, READ on each topic
// (authz.AlterShareGroupOffsets).
//
// A share partition's leader keeps its state in memory while a share session uses it
// and forgets it when none does (so a group without members is read afresh); a leader
// that still holds an older state (a member gone from the group whose session lives
// on) has its next write fenced (FENCED_STATE_EPOCH) and reads the new state then.
// Differences from Apache Kafka: the start offset is not checked against the log.

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/internal/latch"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 91, MinVersion: 0, MaxVersion: 0, Handle: handleAlterShareGroupOffsets, Authz: authz.AlterShareGroupOffsets})
}

func handleAlterShareGroupOffsets(b *Broker, r *Request) {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	resp.Version = req.Version
	fail := func(code int16) {
		resp.ErrorCode = code
		r.Respond(resp)
	}
	if b.features().share && req.GroupID != "" {
		if c := b.groupCoordinatorOr(fail); c != nil {
			if _, code := c.ShareGroupEmpty(req.GroupID); code == kerr.GroupIDNotFound.Code {
				c.CreateShareGroup(req.GroupID, func(code int16) {
					if code != 0 {
						fail(code)
						return
					}
					alterShareGroupOffsets(b, r, req, resp, fail)
				})
				return
			}
		} else {
			return
		}
	}
	alterShareGroupOffsets(b, r, req, resp, fail)
}

// alterShareGroupOffsets is handleAlterShareGroupOffsets once the group exists.
func alterShareGroupOffsets(b *Broker, r *Request, req *kmsg.AlterShareGroupOffsetsRequest, resp *kmsg.AlterShareGroupOffsetsResponse, fail func(int16)) {
	if !b.emptyShareGroup(req.GroupID, fail) {
		return
	}
	im := b.meta.Image()
	type write struct {
		p     *kmsg.AlterShareGroupOffsetsResponseTopicPartition
		topic string
		key   share.Key
		start int64
	}
	var writes []write
	resp.Topics = make([]kmsg.AlterShareGroupOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewAlterShareGroupOffsetsResponseTopic()
		out.Topic = rt.Topic
		t, known := im.Topic(rt.Topic)
		if known {
			out.TopicID = [16]byte(t.ID)
		}
		out.Partitions = make([]kmsg.AlterShareGroupOffsetsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			op := &out.Partitions[j]
			*op = kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				op.ErrorCode = kerr.InvalidRequest.Code
			default:
				writes = append(writes, write{p: op, topic: rt.Topic, key: share.Key{Group: req.GroupID, TopicID: [16]byte(t.ID), Partition: rp.Partition}, start: rp.StartOffset})
			}
		}
	}
	b.shares.resetStates(len(writes), func(i int) (share.Key, int64) { return writes[i].key, writes[i].start }, func(i int, code int16) {
		writes[i].p.ErrorCode = code
	}, func() {
		// The partitions now holding state join the group's share-state record, which
		// DescribeShareGroupOffsets of every topic reads.
		byTopic := map[[16]byte]int{}
		var topics []group.ShareStateTopic
		for _, w := range writes {
			if w.p.ErrorCode != 0 {
				continue
			}
			i, ok := byTopic[w.key.TopicID]
			if !ok {
				i = len(topics)
				byTopic[w.key.TopicID] = i
				topics = append(topics, group.ShareStateTopic{TopicID: w.key.TopicID, TopicName: w.topic})
			}
			topics[i].Partitions = append(topics[i].Partitions, w.key.Partition)
		}
		c := b.coord.Group()
		if len(topics) == 0 || c == nil {
			r.Respond(resp)
			return
		}
		c.RecordShareState(req.GroupID, topics, func(code int16) {
			if code != 0 {
				resp.ErrorCode = code
			}
			r.Respond(resp)
		})
	})
}

// resetStates initializes, for each of n share partitions, a state that starts
// at start with nothing in flight (InitializeShareGroupState), at the state epoch
// after the stored one (read with ReadShareGroupStateSummary), so a leader's older
// state is fenced; set records each outcome, done runs once all are set.
func (s *shareState) resetStates(n int, item func(i int) (share.Key, int64), set func(i int, code int16), done func()) {
	eachShareState(n, func(i int, finish func(code int16)) {
		k, start := item(i)
		p := s.states
		p.Summary(k, func(cur share.Summary, code int16) {
			if code != 0 {
				finish(code)
				return
			}
			p.Initialize(k, cur.StateEpoch+1, start, finish)
		})
	}, set, done)
}

// eachShareState runs op for each of n share partitions in parallel; set records
// each outcome, done runs once all are set.
func eachShareState(n int, op func(i int, finish func(code int16)), set func(i int, code int16), done func()) {
	l := latch.New(done)
	for i := 0; i < n; i++ {
		l.Add()
		op(i, func(code int16) { l.Done(func() { set(i, code) }) })
	}
	l.Done(nil)
}

// emptyShareGroup checks what AlterShareGroupOffsets and DeleteShareGroupOffsets both
// require before they touch share state: share groups on (else UNSUPPORTED_VERSION),
// this broker the group's coordinator, and the group without members
// (NON_EMPTY_GROUP). It reports false once it has answered with fail.
func (b *Broker) emptyShareGroup(group string, fail func(int16)) bool {
	if !b.features().share {
		fail(kerr.UnsupportedVersion.Code)
		return false
	}
	c := b.groupCoordinatorOr(fail)
	if c == nil {
		return false
	}
	empty, code := c.ShareGroupEmpty(group)
	switch {
	case code != 0:
		fail(code)
		return false
	case !empty:
		fail(kerr.NonEmptyGroup.Code)
		return false
	}
	return true
}
