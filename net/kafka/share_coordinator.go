package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/coordinator/share"
	"github.com/samsa-broker/samsa/internal/latch"
	"github.com/samsa-broker/samsa/net/wire"
)

// shareStateItem is one partition of a share coordinator's request (83 to 87):
// answer sets its answer's ErrorCode and ErrorMessage (nil on success).
type shareStateItem struct {
	key    share.Key
	answer func(code int16, msg *string)
}

// serveShareState runs op on this node's share coordinator for each item after the
// checks Kafka's ShareCoordinatorShard makes of every key (share groups on, a
// partition index not negative, a topic partition the image holds; this node the
// leader of the key's __share_group_state partition, loaded), items in parallel,
// and calls respond once all are answered. op's error maps by share.ErrorCode.
func (b *Broker) serveShareState(items []shareStateItem, op func(st *share.Store, k share.Key, done func(error)), respond func()) {
	st := b.coord.ShareStore()
	im := b.meta.Image()
	l := latch.New(respond)
	for _, it := range items {
		code, msg := int16(0), ""
		switch t, ok := im.TopicByID(metadata.UUID(it.key.TopicID)); {
		case !b.features().share:
			code = kerr.UnsupportedVersion.Code
		case it.key.Partition < 0:
			code, msg = kerr.InvalidRequest.Code, "The partition id cannot be a negative number."
		case !ok || int(it.key.Partition) >= len(t.Partitions):
			code = kerr.UnknownTopicOrPartition.Code
		case st == nil:
			code = kerr.NotCoordinator.Code
		}
		if code != 0 {
			it.answer(code, wire.MessageOr(code, msg))
			continue
		}
		l.Add()
		op(st, it.key, func(err error) {
			code := share.ErrorCode(err)
			var m *string
			if code != 0 {
				m = wire.MessageOr(code, err.Error())
			}
			l.Done(func() { it.answer(code, m) })
		})
	}
	l.Done(nil)
}
