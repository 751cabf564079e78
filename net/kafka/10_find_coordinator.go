// FindCoordinator (key 10), versions 0-6.
//
// Answers with this broker for a group whose __consumer_offsets partition
// (abs(javaHash(group)) mod offsets.topic.num.partitions, as Kafka) it leads; v4+
// answers a batch of keys (KIP-699). On first use, as Apache Kafka does, the broker
// creates __consumer_offsets (offsets.topic.num.partitions, default 50, compacted,
// never deleted by retention) and starts loading the partitions it leads; meanwhile
// group requests get COORDINATOR_LOAD_IN_PROGRESS.
//
// Differences from Apache Kafka: there is no transaction coordinator yet, so
// transaction keys (key type 1) get COORDINATOR_NOT_AVAILABLE; share-group keys get
// INVALID_REQUEST. Group settings come from the broker keys
// group.initial.rebalance.delay.ms, group.min.session.timeout.ms,
// group.max.session.timeout.ms, group.max.size, offsets.retention.minutes,
// offsets.retention.check.interval.ms, offset.metadata.max.bytes and
// offsets.topic.num.partitions (Kafka's names and defaults).
//
// This file also holds the broker's group coordinator, shared by the group APIs
// (keys 8, 9, 11-16, 42, 47).
package kafka

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/group"
)

func init() {
	register(API{Key: 10, MinVersion: 0, MaxVersion: 6, Handle: handleFindCoordinator})
}

// groupsHolder is a broker's group coordinator, nil until first use or after Close.
type groupsHolder struct {
	mu sync.Mutex
	c  *group.Coordinator
}

// GroupCoordinator returns the broker's group coordinator, creating
// __consumer_offsets and starting the load of the partitions this broker leads on
// first use. A broker's start-up calls it to load committed offsets before clients
// ask; CloseGroupCoordinator stops it.
func (b *Broker) GroupCoordinator() (*group.Coordinator, error) {
	h := &b.groups
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		return h.c, nil
	}
	c, err := b.startGroupCoordinator()
	if err != nil {
		return nil, err // retried by the next request
	}
	h.c = c
	return c, nil
}

// CloseGroupCoordinator stops the broker's group coordinator, if it was started:
// parked joins are answered NOT_COORDINATOR and its timers stop. Call it before
// closing the engine.
func (b *Broker) CloseGroupCoordinator() {
	h := &b.groups
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		h.c.Close()
		h.c = nil
	}
}

func (b *Broker) groupInt(key string, def int64) int64 {
	v := b.brokerValue(b.meta.Image(), key)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.log.Warn("ignoring unparsable group setting", "key", key, "value", v)
		return def
	}
	return n
}

func (b *Broker) startGroupCoordinator() (*group.Coordinator, error) {
	n := int32(b.groupInt("offsets.topic.num.partitions", 50))
	t, ok := b.meta.Image().Topic(group.OffsetsTopic)
	if !ok {
		cfgs := map[string]string{
			"cleanup.policy":   "compact",
			"segment.bytes":    "104857600",
			"retention.ms":     "-1",
			"retention.bytes":  "-1",
			"compression.type": "producer",
		}
		_, err := b.createTopic(topicSpec{name: group.OffsetsTopic, partitions: n, replication: -1, configs: cfgs}, false)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			b.log.Error("creating __consumer_offsets", "err", err)
			return nil, err
		}
		if t, ok = b.meta.Image().Topic(group.OffsetsTopic); !ok {
			return nil, kerr.CoordinatorNotAvailable
		}
	}
	ms := func(key string, def int64) time.Duration {
		return time.Duration(b.groupInt(key, def)) * time.Millisecond
	}
	delay := ms("group.initial.rebalance.delay.ms", 3000)
	if delay == 0 {
		delay = -1 // Config: negative means none
	}
	c := group.New(group.Config{
		NumPartitions:          int32(len(t.Partitions)),
		MinSessionTimeout:      ms("group.min.session.timeout.ms", 6000),
		MaxSessionTimeout:      ms("group.max.session.timeout.ms", 1800000),
		InitialRebalanceDelay:  delay,
		MaxGroupSize:           int(b.groupInt("group.max.size", 0)),
		OffsetRetention:        time.Duration(b.groupInt("offsets.retention.minutes", 10080)) * time.Minute,
		RetentionCheckInterval: ms("offsets.retention.check.interval.ms", 600000),
		MaxOffsetMetadata:      int(b.groupInt("offset.metadata.max.bytes", 4096)),
		Logger:                 b.log.With("component", "groups"),
	}, group.NewEngineLog(b.eng))
	var led []int32
	for p, pi := range t.Partitions {
		if pi.Leader == b.cfg.NodeID {
			led = append(led, int32(p))
		}
	}
	c.StartLoading(led, func(err error) {
		if err != nil {
			b.log.Error("loading __consumer_offsets", "err", err)
		}
	})
	return c, nil
}

// groupCoordinatorOr returns the coordinator, or answers code via fail.
func (b *Broker) groupCoordinatorOr(fail func(code int16)) *group.Coordinator {
	c, err := b.GroupCoordinator()
	if err != nil {
		fail(kerr.CoordinatorNotAvailable.Code)
		return nil
	}
	return c
}

// clientHost is the member host Kafka reports: "/" and the peer's IP.
func clientHost(r *Request) string {
	if r.Conn == nil || r.Conn.RemoteAddr() == nil {
		return ""
	}
	addr := r.Conn.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "/" + addr
}

func handleFindCoordinator(b *Broker, r *Request) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		code := b.findCoordinator(req.CoordinatorType, key)
		if code == 0 {
			rc.NodeID, rc.Host, rc.Port = b.cfg.NodeID, b.cfg.Host, b.cfg.Port
		} else {
			rc.ErrorCode = code
			msg := kerr.ErrorForCode(code).Error()
			rc.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = rc.ErrorCode, rc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	r.Respond(resp)
}

// findCoordinator returns 0 when this broker coordinates key, else the error code.
func (b *Broker) findCoordinator(keyType int8, key string) int16 {
	switch keyType {
	case 0: // group
	case 1: // transaction
		return kerr.CoordinatorNotAvailable.Code
	default:
		return kerr.InvalidRequest.Code
	}
	if key == "" {
		return kerr.InvalidRequest.Code
	}
	c, err := b.GroupCoordinator()
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	t, ok := b.meta.Image().Topic(group.OffsetsTopic)
	p := c.PartitionFor(key)
	if !ok || int(p) >= len(t.Partitions) || t.Partitions[p].Leader != b.cfg.NodeID {
		return kerr.CoordinatorNotAvailable.Code // one node: nobody else leads it
	}
	return 0
}
