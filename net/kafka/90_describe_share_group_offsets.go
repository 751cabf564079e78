// DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; v1: KIP-1226's Lag).
//
// Asked of a share group's coordinator: per topic partition, the share-partition
// start offset (SPSO) and the leader epoch of the share partition's last write, read
// from the share partition's share coordinator with ReadShareGroupStateSummary (87);
// StartOffset -1 for a partition the group has no state for, or whose start its
// leader has not picked yet. With Topics null, the topics the group's members
// subscribe to and those it holds share state for (its
// ShareGroupStatePartitionMetadata record: the group coordinator adds a topic when
// the group first subscribes to it or AlterShareGroupOffsets sets it,
// DeleteShareGroupOffsets removes it). v1's Lag (KIP-1226) is the partition's high
// watermark (as this broker's replica knows it) minus the start offset minus the
// summary's DeliveryCompleteCount (the records at or above the start already
// acknowledged or archived); -1 when this broker has no replica of the partition or
// the partition has no start offset. A group that is not a share group answers
// GROUP_ID_NOT_FOUND. With ACLs: DESCRIBE on the group and on each topic
// (authz.DescribeShareGroupOffsets).
//
// Differences from Apache Kafka: Lag from this broker's replica's high watermark
// (Kafka asks the partition's leader).

package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/internal/latch"
	"github.com/samsa-broker/samsa/net/authz"
)

func init() {
	register(API{Key: 90, MinVersion: 0, MaxVersion: 1, Handle: handleDescribeShareGroupOffsets, Authz: authz.DescribeShareGroupOffsets})
}

func handleDescribeShareGroupOffsets(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
	resp.Version = req.Version
	fail := func(code int16) {
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			rg.GroupID, rg.ErrorCode = g.GroupID, code
			resp.Groups = append(resp.Groups, rg)
		}
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
	im := b.meta.Image()
	type read struct {
		p   *kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition
		key share.Key
		log *engine.Log
	}
	var reads []read
	resp.Groups = make([]kmsg.DescribeShareGroupOffsetsResponseGroup, len(req.Groups))
	for i, g := range req.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		topics, code, ok := c.ShareGroupTopics(g.GroupID)
		if !ok {
			if code == 0 {
				code = kerr.GroupIDNotFound.Code
			}
			rg.ErrorCode = code
			continue
		}
		asked := g.Topics
		if asked == nil {
			for _, name := range topics {
				if t, ok := im.Topic(name); ok {
					rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
					rt.Topic = name
					for p := range t.Partitions {
						rt.Partitions = append(rt.Partitions, int32(p))
					}
					asked = append(asked, rt)
				}
			}
		}
		rg.Topics = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, len(asked))
		for j, at := range asked {
			rt := &rg.Topics[j]
			*rt = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = at.Topic
			t, known := im.Topic(at.Topic)
			if known {
				rt.TopicID = [16]byte(t.ID)
			}
			rt.Partitions = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, len(at.Partitions))
			for k, pn := range at.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = pn, -1, -1, -1
				if !known || pn < 0 || int(pn) >= len(t.Partitions) {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				reads = append(reads, read{p: rp, key: share.Key{Group: g.GroupID, TopicID: [16]byte(t.ID), Partition: pn},
					log: b.eng.Log(engine.TopicPartition{Topic: t.Name, Partition: pn})})
			}
		}
	}
	l := latch.New(func() { r.Respond(resp) })
	for _, rd := range reads {
		l.Add()
		b.shares.states.Summary(rd.key, func(sum share.Summary, code int16) {
			l.Done(func() {
				switch {
				case code != 0:
					rd.p.ErrorCode = code
				case sum.Found:
					rd.p.StartOffset, rd.p.LeaderEpoch = sum.StartOffset, sum.LeaderEpoch
					if rd.log != nil && sum.StartOffset >= 0 && sum.DeliveryComplete >= 0 {
						rd.p.Lag = max(rd.log.HighWatermark()-sum.StartOffset-int64(sum.DeliveryComplete), 0)
					}
				}
			})
		})
	}
	l.Done(nil)
}
