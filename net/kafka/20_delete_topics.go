// DeleteTopics (key 20), versions 0-6.
//
// Topics by name (v0-5: TopicNames; v6: Topics with a name) or by topic id (v6: Topics
// with a null name). Each deletion removes the topic and its config overrides from the
// metadata log, then deletes the partition logs (the engine renames them to
// "<dir>.<uuid>-delete" and removes them in the background). Unknown names answer
// UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; an entry with both a name
// and an id, or neither, INVALID_REQUEST.
//
// Differences from Apache Kafka: deletion completes before the answer; internal topics
// may be deleted (no authorizer to refuse it).
package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

func init() {
	register(API{Key: 20, MinVersion: 0, MaxVersion: 6, Handle: handleDeleteTopics})
}

func handleDeleteTopics(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	if r.Header.Version < 6 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			topics[i].Topic = &req.TopicNames[i]
		}
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, err := b.deleteOne(t.Topic, t.TopicID)
		if name != "" {
			rt.Topic = &name // answered with the name also when deleted by id, as Kafka does
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// deleteOne deletes the topic named or identified; it returns the topic's name when found.
func (b *Broker) deleteOne(name *string, id [16]byte) (string, error) {
	im := b.meta.Image()
	hasName, hasID := name != nil && *name != "", id != [16]byte{}
	var t *metadata.TopicImage
	var ok bool
	switch {
	case hasName == hasID:
		return "", errf(kerr.InvalidRequest, "give a topic name or a topic id, not both or neither")
	case hasName:
		if t, ok = im.Topic(*name); !ok {
			return "", errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", *name)
		}
	default:
		if t, ok = im.TopicByID(metadata.UUID(id)); !ok {
			return "", errf(kerr.UnknownTopicID, "topic id does not exist")
		}
	}
	return t.Name, b.deleteTopicLocked(t)
}
