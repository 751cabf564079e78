package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/group"
	"github.com/samsa-broker/samsa/net/peer"
)

// metadataTopic is the metadata log's topic (__cluster_metadata).
const metadataTopic = peer.MetadataTopic

// AutoCreateEnabled reports auto.create.topics.enable (dynamic override, else static).
func (b *Broker) AutoCreateEnabled() bool {
	return b.keys.value(b.meta.Image(), "auto.create.topics.enable") == "true"
}

// Topics creates topics through the active controller on the handlers' behalf (the
// node's assembly, net/broker: Kafka's AutoTopicCreationManager). AutoCreate and
// EnsureInternal block: call them off the read path.
type Topics interface {
	// AutoCreate creates topics with the broker's defaults (num.partitions,
	// default.replication.factor: auto.create.topics.enable), waits until the image
	// handlers answer from shows them and returns each topic's code (0 also for one
	// that already existed).
	AutoCreate(ctx context.Context, topics []string) map[string]int16
	// CreateStreamsTopics starts the creation of a streams group's internal topics
	// with their partitions, replication factor and configs, on a goroutine of the
	// node's, and returns at once: each topic is asked for once at a time, though
	// every heartbeat of the group reports it missing until it exists; a failure is
	// logged (the next heartbeat asks again).
	CreateStreamsTopics(topics []group.StreamsTopicInfo)
	// EnsureInternal returns once the image has the internal topic name
	// (__consumer_offsets, __transaction_state, __share_group_state), creating it
	// with its keys if it has not, one creation at a time per topic.
	EnsureInternal(ctx context.Context, name string) error
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
