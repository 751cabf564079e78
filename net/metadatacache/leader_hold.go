package metadatacache

import (
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// A Metadata answer that would name a lost broker as a partition's leader waits for
// the controller to fence it, for at most LeaderHold from the moment the broker was
// lost (this node's connections to it were closed by its side or refused). When a
// leader's process dies, its followers lose it at once, and its clients ask for
// metadata at once; the controller fences it a little later (its heartbeat
// connection closed and its listener refuses: tens of milliseconds; when it was also
// the active controller, after the quorum elected another, one to two seconds).
// Answered at once, that first Metadata request names the dead leader again, and a
// client that then waits before it asks again (franz-go's MetadataMinAge, 5 s) stays
// on it for that long; held until the fence, the answer names the new leader. Only
// the requests whose answer names a lost leader wait, the rest are answered at once,
// and past LeaderHold nothing waits for that broker any more (a broker only this
// node cannot reach is not held against for longer).

//
// A killed process's sockets are closed one by one as it exits, so its client can
// see its connection close, and ask this node for metadata, a moment before this
// node's own connections to it close: an answer naming a leader on another broker
// that this node has not lost is therefore sent after a second look, LeaderSettle
// later, and held like the others if that look finds the leader lost.

// LeaderHold bounds how long after a broker was lost Metadata answers naming it
// leader may wait: the quorum's election (controller.quorum.election.timeout.ms, 1 s,
// randomized up to twice that) and the fence after it.
const LeaderHold = 3 * time.Second

// LeaderSettle is how long after a Metadata request naming a leader on another
// broker this node looks again whether it lost that broker, before it answers. The
// failover timeline (cmd/samsa, TestProcFailoverTimeline) saw a franz-go client ask
// 1 ms after the kill of its leader and be answered at once with the dead leader,
// this node's connections to it not closed yet; franz-go then asks again only after
// its MetadataMinAge (5 s), and its partitions went that long without an
// acknowledgement.
const LeaderSettle = 10 * time.Millisecond

// LeaderHoldUntil returns until when an answer from im naming the leaders of topics'
// partitions should wait: the end of the hold of a lost, unfenced broker other than
// self that leads one of them; zero when none does. remote reports whether one of
// them is led by an unfenced broker other than self that is not lost (LeaderSettle
// applies). unreachable reports since when this node has lost a broker.
func LeaderHoldUntil(im *metadata.Image, self int32, unreachable func(id int32) (time.Time, bool), topics []*metadata.TopicImage, now time.Time) (until time.Time, remote bool) {
	lost := map[int32]time.Time{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			id := p.Leader
			if id < 0 || id == self {
				continue
			}
			end, seen := lost[id]
			if !seen {
				if bi, ok := im.Broker(id); ok && !bi.Fenced {
					if since, ok := unreachable(id); ok && now.Before(since.Add(LeaderHold)) {
						end = since.Add(LeaderHold)
					} else if !ok {
						remote = true
					}
				}
				lost[id] = end
			}
			if end.After(until) {
				until = end
			}
		}
	}
	return until, remote
}
