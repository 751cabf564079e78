package kafka

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/peer"
)

// metadataTopic is the metadata log's topic (__cluster_metadata).
const metadataTopic = peer.MetadataTopic

// AutoCreateEnabled reports auto.create.topics.enable (dynamic override, else static).
func (b *Broker) AutoCreateEnabled() bool {
	return b.keys.value(b.meta.Image(), "auto.create.topics.enable") == "true"
}

// AutoCreateTopic creates topic through the active controller with the broker's
// defaults (num.partitions, default.replication.factor) if auto.create.topics.enable
// and the name is valid, and returns it once this broker's image has it (also when
// another request created it first). It blocks: call it off the read path. Errors are
// Kafka errors: UNKNOWN_TOPIC_OR_PARTITION when auto-creation is off,
// INVALID_TOPIC_EXCEPTION for a bad name, the controller's refusal, REQUEST_TIMED_OUT.
func (b *Broker) AutoCreateTopic(ctx context.Context, topic string) (*metadata.TopicImage, error) {
	if t, ok := b.meta.Image().Topic(topic); ok {
		return t, nil
	}
	if !b.AutoCreateEnabled() {
		return nil, kerr.UnknownTopicOrPartition
	}
	if err := validTopicName(topic); err != nil {
		return nil, kerr.InvalidTopicException
	}
	if code := b.autoCreate(ctx, []string{topic})[topic]; code != 0 {
		return nil, kerr.ErrorForCode(code)
	}
	if t, ok := b.meta.Image().Topic(topic); ok {
		return t, nil
	}
	return nil, kerr.LeaderNotAvailable
}

// autoCreate asks the active controller to create topics with the broker's defaults
// and waits until this broker's image has them. It returns each topic's code (0 also
// for one that already existed).
func (b *Broker) autoCreate(ctx context.Context, topics []string) map[string]int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(defaultForwardTimeout.Milliseconds())
	for _, name := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		req.Topics = append(req.Topics, rt)
	}
	return b.topicMgr.Create(ctx, req)
}

// Topics creates topics through the active controller on the handlers' behalf (the
// node's assembly, net/broker: Kafka's AutoTopicCreationManager). Both block: call
// them off the read path.
type Topics interface {
	// Create sends req (topics the broker creates on its own: auto-created ones, a
	// streams group's internal topics), waits until the image handlers answer from
	// shows them and returns each topic's code (TOPIC_ALREADY_EXISTS counts as 0).
	Create(ctx context.Context, req *kmsg.CreateTopicsRequest) map[string]int16
	// EnsureInternal returns once the image has the internal topic name
	// (__consumer_offsets, __transaction_state, __share_group_state), creating it
	// with its keys if it has not, one creation at a time per topic.
	EnsureInternal(ctx context.Context, name string) error
}

// validTopicName applies Kafka's rules: [a-zA-Z0-9._-], 1..249 chars, not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("topic name %q is illegal", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// isInternalTopic reports Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// kafkaErr pairs a Kafka error with a message for the response.
type kafkaErr struct {
	code *kerr.Error
	msg  string
}

func (e *kafkaErr) Error() string { return e.code.Message + ": " + e.msg }
func (e *kafkaErr) Unwrap() error { return e.code }

func errf(code *kerr.Error, format string, args ...any) error {
	return &kafkaErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// errCode and errMsg map an error to a Kafka code and message at the edge.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, configs.ErrInvalidConfig) {
		return kerr.InvalidConfig.Code
	}
	return kerr.UnknownServerError.Code
}

func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	var ke *kafkaErr
	if errors.As(err, &ke) {
		return &ke.msg
	}
	s := err.Error()
	return &s
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func stringPtr(s string) *string { return &s }

// refuseForFiles answers r (CreateTopics, CreatePartitions) with POLICY_VIOLATION for
// every topic when the request's new replicas on this broker do not fit under the open
// file limit (Deps.FileHeadroom), and says whether it did.
func (b *Broker) refuseForFiles(r *Request) bool {
	if b.headroom == nil {
		return false
	}
	msg := b.headroom(r.Body)
	if msg == "" {
		return false
	}
	b.log.Warn("refusing new partitions: open file limit", "detail", msg)
	r.Respond(controller.ErrorResponse(r.Body, kerr.PolicyViolation.Code, msg))
	return true
}
