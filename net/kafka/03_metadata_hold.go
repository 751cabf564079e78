package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/metadatacache"
)

// leaderHoldUntil returns until when the answer to req, from im, should wait, and
// whether it names a leader on another broker (metadatacache.LeaderHoldUntil).
func (b *Broker) leaderHoldUntil(im *metadata.Image, req *kmsg.MetadataRequest, all bool, now time.Time) (time.Time, bool) {
	up := b.unreachable.Load()
	if up == nil {
		return time.Time{}, false
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
// it again), or at until, whichever comes first; with settle, it first waits that
// long and looks again (metadatacache.LeaderSettle).
func (b *Broker) holdMetadata(r *Request, req *kmsg.MetadataRequest, all bool, until time.Time, settle time.Duration) {
	b.async(func(ctx context.Context) {
		if settle > 0 {
			select {
			case <-time.After(settle):
			case <-ctx.Done():
			}
			until, _ = b.leaderHoldUntil(b.meta.Image(), req, all, time.Now())
		}
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()
		// The image's change is broadcast; a dial that reaches the broker again is not:
		// look again every holdPoll as well.
		const holdPoll = 20 * time.Millisecond
		poll := time.NewTicker(holdPoll)
		defer poll.Stop()
		for {
			changed := b.meta.Changed()
			if until, _ := b.leaderHoldUntil(b.meta.Image(), req, all, time.Now()); until.IsZero() {
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
