package replication

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientSession is the follower's side of a KIP-227 incremental fetch session with one
// source broker (Kafka's FetchSessionHandler): what the leader's session holds for each
// partition, so that an incremental request names only what changed.
//
//	id 0, epoch 0     no session: the next request is full (SessionID = the id to close,
//	                  SessionEpoch 0), and its answer's SessionID opens one (0: the
//	                  leader keeps none; every request stays full)
//	id n, epoch k>0   the next request is incremental: partitions new or changed since
//	                  the last answer, and the ones no longer fetched as forgotten
//
// Any error (transport, a top-level error, an unknown session or epoch) drops the
// session: the next request is full again and closes the old id.
type clientSession struct {
	id, epoch int32
	closeID   int32                // an old session to close with the next full request
	parts     map[sessKey]sessWant // as the leader's session holds them
	order     []sessKey            // parts in the order they were added
	// gen changes whenever parts is replaced or dropped. A fetchPart whose sentGen
	// is gen is in parts with the value sent (fetchPart.sent): the common case, an
	// unchanged partition, then costs no map lookup.
	gen uint64
}

// sessKey names a partition in a session. Both the name and the id are set: the leader
// keys by id from Fetch v13 on and by name before, and the version is the client's
// choice.
type sessKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessWant is what a request asks of a partition.
type sessWant struct {
	offset, logStart int64
	maxBytes         int32
	curEpoch, last   int32
}

// want is one partition a request fetches.
type want struct {
	key sessKey
	w   sessWant
	fp  *fetchPart // its fetcher's state (nil: none to cache the sent value in)
}

// sessBuild is a request's session plan, committed when its answer succeeds.
type sessBuild struct {
	full    bool
	same    bool // incremental, the same partitions as the session's: no new one, none forgotten
	wants   []want
	changed []int // incremental: the wants the request names
}

// build fills req's session fields, Topics and ForgottenTopics (both the topic name
// and id) for wants (grouped by topic, in order).
func (s *clientSession) build(req *kmsg.FetchRequest, wants []want) sessBuild {
	b := sessBuild{full: s.epoch == 0, wants: wants}
	if b.full {
		req.SessionID, req.SessionEpoch = s.closeID, 0
		for _, w := range wants {
			addTopicPartition(req, w)
		}
		return b
	}
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	known := 0 // wants the session holds (the keys of wants are distinct)
	for i, w := range wants {
		if w.fp != nil && w.fp.sentGen != 0 && w.fp.sentGen == s.gen && w.fp.sent == w.w {
			known++
			continue
		}
		prev, ok := s.parts[w.key]
		if ok {
			known++
			if prev == w.w && w.fp != nil {
				w.fp.sent, w.fp.sentGen = prev, s.gen // what the session holds: true whatever the answer
			}
		}
		if !ok || prev != w.w {
			addTopicPartition(req, w)
			b.changed = append(b.changed, i)
		}
	}
	if known == len(s.order) {
		b.same = known == len(wants) // nothing forgotten; the same set unless some are new
		return b
	}
	in := make(map[sessKey]bool, len(wants))
	for _, w := range wants {
		in[w.key] = true
	}
	for _, k := range s.order {
		if !in[k] {
			addForgotten(req, k)
		}
	}
	return b
}

func addTopicPartition(req *kmsg.FetchRequest, w want) {
	n := len(req.Topics)
	if n == 0 || req.Topics[n-1].Topic != w.key.topic || req.Topics[n-1].TopicID != w.key.id {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = w.key.topic, w.key.id
		req.Topics = append(req.Topics, t)
		n++
	}
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.LogStartOffset, p.PartitionMaxBytes = w.key.partition, w.w.offset, w.w.logStart, w.w.maxBytes
	p.CurrentLeaderEpoch, p.LastFetchedEpoch = w.w.curEpoch, w.w.last
	req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, p)
}

func addForgotten(req *kmsg.FetchRequest, k sessKey) {
	n := len(req.ForgottenTopics)
	if n == 0 || req.ForgottenTopics[n-1].Topic != k.topic || req.ForgottenTopics[n-1].TopicID != k.id {
		t := kmsg.NewFetchRequestForgottenTopic()
		t.Topic, t.TopicID = k.topic, k.id
		req.ForgottenTopics = append(req.ForgottenTopics, t)
		n++
	}
	req.ForgottenTopics[n-1].Partitions = append(req.ForgottenTopics[n-1].Partitions, k.partition)
}

// commit records a successful answer to the request b was built for.
func (s *clientSession) commit(b sessBuild, respSessionID int32) {
	if b.full {
		s.closeID = 0
		s.id = respSessionID
		if s.id == 0 {
			s.epoch, s.parts, s.order = 0, nil, nil // sessionless: every request is full
			s.gen++
			return
		}
		s.epoch = 1
	} else if s.epoch == 1<<31-1 {
		s.epoch = 1
	} else {
		s.epoch++
	}
	if b.same {
		// The same partitions: only the values of those named move.
		for _, i := range b.changed {
			w := b.wants[i]
			s.parts[w.key] = w.w
			if w.fp != nil {
				w.fp.sent, w.fp.sentGen = w.w, s.gen
			}
		}
		return
	}
	s.gen++
	s.parts = make(map[sessKey]sessWant, len(b.wants))
	s.order = s.order[:0]
	for _, w := range b.wants {
		s.parts[w.key] = w.w
		s.order = append(s.order, w.key)
		if w.fp != nil {
			w.fp.sent, w.fp.sentGen = w.w, s.gen
		}
	}
}

// reset drops the session after an error: the next request is full.
func (s *clientSession) reset() {
	if s.id != 0 {
		s.closeID = s.id
	}
	s.id, s.epoch, s.parts, s.order = 0, 0, nil, nil
	s.gen++
}
