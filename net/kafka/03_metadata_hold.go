package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// A Metadata answer that would name a lost broker as a partition's leader waits for
// the controller to fence it, for at most LeaderHold from the moment the broker was
// lost (Deps.Unreachable: this node's connections to it were closed by its side or
// refused). When a leader's process dies, its followers lose it at once, and its
// clients ask for metadata at once; the controller fences it a little later (its
// heartbeat connection closed and its listener refuses: tens of milliseconds; when
// it was also the active controller, after the quorum elected another, one to two
// seconds). Answered at once, that first Metadata request names the dead leader
// again, and a client that then waits before it asks again (franz-go's
// MetadataMinAge, 5 s) stays on it for that long; held until the fence, the answer
// names the new leader. Only the requests whose answer names a lost leader wait, the
// rest are answered at once, and past LeaderHold nothing waits for that broker any
// more (a broker only this node cannot reach is not held against for longer).

// LeaderHold bounds how long after a broker was lost Metadata answers naming it
// leader may wait: the quorum's election (controller.quorum.election.timeout.ms, 1 s,
// randomized up to twice that) and the fence after it.
const LeaderHold = 3 * time.Second

// leaderHoldUntil returns until when the answer to req, from im, should wait: the
// end of the hold of a lost, unfenced broker that leads a partition the answer would
// name; zero when none does.
func (b *Broker) leaderHoldUntil(im *metadata.Image, req *kmsg.MetadataRequest, all bool, now time.Time) time.Time {
	up := b.unreachable.Load()
	if up == nil {
		return time.Time{}
	}
	unreachable := *up
	var until time.Time
	lost := map[int32]time.Time{}
	check := func(id int32) {
		if id < 0 || id == b.cfg.NodeID {
			return
		}
		end, seen := lost[id]
		if !seen {
			if bi, ok := im.Broker(id); ok && !bi.Fenced {
				if since, ok := unreachable(id); ok && now.Before(since.Add(LeaderHold)) {
					end = since.Add(LeaderHold)
				}
			}
			lost[id] = end
		}
		if end.After(until) {
			until = end
		}
	}
	topic := func(t *metadata.TopicImage) {
		for _, p := range t.Partitions {
			check(p.Leader)
		}
	}
	if all {
		for _, t := range im.Topics() {
			topic(t)
		}
		return until
	}
	for _, rt := range req.Topics {
		var t *metadata.TopicImage
		var ok bool
		if rt.Topic != nil && *rt.Topic != "" {
			t, ok = im.Topic(*rt.Topic)
		} else {
			t, ok = im.TopicByID(metadata.UUID(rt.TopicID))
		}
		if ok {
			topic(t)
		}
	}
	return until
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
