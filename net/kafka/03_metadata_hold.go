package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/metadatacache"
)

// leaderHoldUntil returns until when the answer to req, from im, should wait
// (metadatacache.LeaderHoldUntil); zero when it need not.
func (b *Broker) leaderHoldUntil(im *metadata.Image, req *kmsg.MetadataRequest, all bool, now time.Time) time.Time {
	up := b.unreachable.Load()
	if up == nil {
		return time.Time{}
	}
	topics := im.Topics()
	if !all {
		topics = nil
		for _, rt := range req.Topics {
			var t *metadata.TopicImage
			var ok bool
			if rt.Topic != nil && *rt.Topic != "" {
				t, ok = im.Topic(*rt.Topic)
			} else {
				t, ok = im.TopicByID(metadata.UUID(rt.TopicID))
			}
			if ok {
				topics = append(topics, t)
			}
		}
	}
	return metadatacache.LeaderHoldUntil(im, b.cfg.NodeID, *up, topics, now)
}

// holdMetadata answers r from a goroutine of its own once no partition its answer
// names is led by a lost, unfenced broker (a new image fenced it, or a dial reached
// it again), or at until, whichever comes first.
func (b *Broker) holdMetadata(r *Request, req *kmsg.MetadataRequest, all bool, until time.Time) {
	b.async(func(ctx context.Context) {
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()
		// The image's change is broadcast; a dial that reaches the broker again is not:
		// look again every holdPoll as well.
		const holdPoll = 20 * time.Millisecond
		poll := time.NewTicker(holdPoll)
		defer poll.Stop()
		for {
			changed := b.meta.Changed()
			if b.leaderHoldUntil(b.meta.Image(), req, all, time.Now()).IsZero() {
				break
			}
			select {
			case <-changed:
				continue
			case <-poll.C:
				continue
			case <-timer.C:
			case <-ctx.Done():
			}
			break
		}
		b.answerMetadata(r, req, all)
	})
}
