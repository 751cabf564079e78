package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// LocalController is the single-node metadata path: a coordinator/metadata.Store that
// is at once the committed log, the published image (MetadataView) and the active
// controller (ControllerChannel) of a one-node cluster. Admin requests are validated
// against the image and appended as records; subscribers hear of every change, in
// order, before the request is answered.
//
// It serves what a one-node cluster needs: CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, AllocateProducerIds,
// ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments and
// DescribeQuorum (its high watermark is the store's offset + 1). Every replica is this
// node, so replication factors above 1 are refused. It is what a single node runs
// until net/node builds coordinator/controller's Controller over a raft quorum of one;
// that controller takes its place behind the same two interfaces, with its own
// validation (placement over many brokers, fencing, elections).
//
// Safe for concurrent use: writes are serialized by mu, so subscribers see changes
// in store order.
type LocalController struct {
	store  *metadata.Store
	nodeID int32
	static map[string]string
	log    *slog.Logger

	// maxPartitionsPerOp bounds the partitions one request may create (Kafka's
	// controller refuses more than 10,000 records per user operation).
	maxPartitionsPerOp int32

	mu   sync.Mutex // serializes writes and the notifications that follow them
	subs []func(offset uint64, old, new *metadata.Image)
}

// defaultMaxPartitionsPerOp is Kafka's MAX_RECORDS_PER_USER_OP.
const defaultMaxPartitionsPerOp = 10000

var (
	_ ControllerChannel = (*LocalController)(nil)
	_ MetadataView      = (*LocalController)(nil)
)

// NewLocalController returns the single-node controller over store for node self. It
// registers self (its PLAINTEXT endpoint, rack) in the store when the registration
// differs, as the node's broker lifecycle would. static are the node's explicitly set
// keys (num.partitions, default.replication.factor, ... and the topic defaults).
func NewLocalController(store *metadata.Store, self metadata.BrokerImage, static map[string]string, log *slog.Logger) (*LocalController, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if static == nil {
		static = map[string]string{}
	}
	lc := &LocalController{store: store, nodeID: self.ID, static: static, log: log, maxPartitionsPerOp: defaultMaxPartitionsPerOp}
	im := store.Image()
	if cur, ok := im.Broker(self.ID); !ok || cur.Host != self.Host || cur.Port != self.Port || !sameRack(cur.Rack, self.Rack) {
		rec := &metadata.RegisterBrokerRecord{ID: self.ID, Epoch: im.MaxBrokerEpoch() + 1, Rack: self.Rack,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: self.Host, Port: self.Port, SecurityProtocol: metadata.ProtocolPlaintext}}}
		if err := store.Append(rec); err != nil {
			return nil, fmt.Errorf("kafka: registering broker %d: %w", self.ID, err)
		}
	}
	return lc, nil
}

func sameRack(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// Image implements MetadataView: the store's image and offset (records appended).
func (lc *LocalController) Image() (uint64, *metadata.Image) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.offsetLocked(), lc.store.Image()
}

func (lc *LocalController) offsetLocked() uint64 { return uint64(max(lc.store.Offset(), 0)) }

// Subscribe adds fn, called after every change with the offset and the images before
// and after it, in order, on the writing goroutine, before the write's request is
// answered. fn must not call back into the controller.
func (lc *LocalController) Subscribe(fn func(offset uint64, old, new *metadata.Image)) {
	lc.mu.Lock()
	lc.subs = append(lc.subs, fn)
	lc.mu.Unlock()
}

// appendLocked appends recs and tells the subscribers. Caller holds mu.
func (lc *LocalController) appendLocked(recs ...metadata.Record) error {
	old := lc.store.Image()
	if err := lc.store.Append(recs...); err != nil {
		return err
	}
	im, off := lc.store.Image(), lc.offsetLocked()
	for _, fn := range lc.subs {
		fn(off, old, im)
	}
	return nil
}

// Request implements ControllerChannel: it answers req as the active controller of a
// one-node cluster. Requests of other kinds fail with an error wrapping
// kerr.InvalidRequest.
func (lc *LocalController) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp = lc.createTopics(r)
	case *kmsg.DeleteTopicsRequest:
		resp = lc.deleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		resp = lc.createPartitions(r)
	case *kmsg.AlterConfigsRequest:
		resp = lc.alterConfigsLegacy(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		resp = lc.incrementalAlterConfigs(r)
	case *kmsg.AllocateProducerIDsRequest:
		resp = lc.allocateProducerIDs(r)
	case *kmsg.ElectLeadersRequest:
		resp = lc.electLeaders(r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		resp = lc.alterReassignments(r)
	case *kmsg.ListPartitionReassignmentsRequest:
		resp = lc.listReassignments(r)
	case *kmsg.DescribeQuorumRequest:
		resp = lc.describeQuorum(r)
	default:
		return nil, fmt.Errorf("%w: %s is not served by the single-node controller", kerr.InvalidRequest, kmsg.NameForKey(req.Key()))
	}
	resp.SetVersion(req.GetVersion())
	return resp, nil
}

func (lc *LocalController) layers(im *metadata.Image, topic string) configs.Layers {
	return configs.ForImage(im, lc.nodeID, lc.static, topic)
}

func (lc *LocalController) brokerInt(im *metadata.Image, key string) int64 {
	l := lc.layers(im, "")
	return l.BrokerInt(key)
}

// ---- CreateTopics ----

// topicSpec is a validated creation request.
type topicSpec struct {
	name        string
	partitions  int32     // -1: num.partitions
	replication int16     // -1: default.replication.factor
	assignment  [][]int32 // explicit replica assignment, or nil
	configs     map[string]string
	// used is how many partitions the request already created: a request may create at
	// most maxPartitionsPerOp in all.
	used int32
}

func (lc *LocalController) createTopics(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	var used int32
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		spec, err := createSpec(&t, seen[t.Topic] > 1)
		spec.used = used
		if err == nil {
			err = lc.createTopicLocked(&spec, req.ValidateOnly)
			if err == nil {
				used += spec.partitions
				rt.NumPartitions, rt.ReplicationFactor = spec.partitions, spec.replication
				if !req.ValidateOnly {
					if ti, ok := lc.store.Image().Topic(t.Topic); ok {
						rt.TopicID = ti.ID
					}
				}
				rt.Configs = lc.createdConfigs(&spec)
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createSpec turns a request topic into a spec (shape checks only).
func createSpec(t *kmsg.CreateTopicsRequestTopic, duplicate bool) (topicSpec, error) {
	s := topicSpec{name: t.Topic, partitions: t.NumPartitions, replication: t.ReplicationFactor, configs: map[string]string{}}
	if duplicate {
		return s, errf(kerr.InvalidRequest, "topic %q given more than once", t.Topic)
	}
	if len(t.ReplicaAssignment) > 0 {
		s.assignment = make([][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(t.ReplicaAssignment) || s.assignment[a.Partition] != nil {
				return s, errf(kerr.InvalidReplicaAssignment, "partitions should be numbered 0 to %d, each once", len(t.ReplicaAssignment)-1)
			}
			s.assignment[a.Partition] = a.Replicas
			if a.Replicas == nil {
				s.assignment[a.Partition] = []int32{}
			}
		}
	}
	for _, c := range t.Configs {
		if _, dup := s.configs[c.Name]; dup {
			return s, errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		if c.Value == nil {
			return s, errf(kerr.InvalidConfig, "null value for config %q", c.Name)
		}
		s.configs[c.Name] = *c.Value
	}
	return s, nil
}

// resolveSpec fills defaults and validates a creation request (everything but
// existence).
func (lc *LocalController) resolveSpec(im *metadata.Image, s *topicSpec) error {
	if err := validTopicName(s.name); err != nil {
		return errf(kerr.InvalidTopicException, "%v", err)
	}
	if s.assignment != nil {
		if len(s.assignment) > int(lc.maxPartitionsPerOp-s.used) {
			return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", len(s.assignment), lc.maxPartitionsPerOp)
		}
		if s.partitions != -1 || s.replication != -1 {
			return errf(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignment were set")
		}
		for p, replicas := range s.assignment {
			if err := lc.checkReplicas(replicas, p); err != nil {
				return err
			}
		}
		s.partitions, s.replication = int32(len(s.assignment)), int16(len(s.assignment[0]))
	} else {
		if s.partitions == -1 {
			s.partitions = int32(lc.brokerInt(im, "num.partitions"))
		}
		if s.replication == -1 {
			s.replication = int16(lc.brokerInt(im, "default.replication.factor"))
		}
		if s.partitions <= 0 {
			return errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
		}
		if s.replication <= 0 {
			return errf(kerr.InvalidReplicationFactor, "replication factor must be larger than 0")
		}
		if s.partitions > lc.maxPartitionsPerOp-s.used {
			return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", s.partitions, lc.maxPartitionsPerOp)
		}
		if s.replication > 1 {
			return errf(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: 1", s.replication)
		}
		for range s.partitions {
			s.assignment = append(s.assignment, []int32{lc.nodeID})
		}
	}
	for k, v := range s.configs {
		canon, err := configs.ValidateTopic(k, &v)
		if err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		s.configs[k] = canon
	}
	return nil
}

// checkReplicas validates one partition's replica list on this one-node cluster.
func (lc *LocalController) checkReplicas(replicas []int32, p int) error {
	if len(replicas) == 0 {
		return errf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", p)
	}
	if len(replicas) > 1 {
		return errf(kerr.InvalidReplicationFactor, "partition %d: replication factor %d larger than available brokers: 1", p, len(replicas))
	}
	if replicas[0] != lc.nodeID {
		return errf(kerr.InvalidReplicaAssignment, "partition %d: unknown broker %d", p, replicas[0])
	}
	return nil
}

// createTopicLocked validates s and, unless validateOnly, records the topic. Caller
// holds mu.
func (lc *LocalController) createTopicLocked(s *topicSpec, validateOnly bool) error {
	im := lc.store.Image()
	if err := lc.resolveSpec(im, s); err != nil {
		return err
	}
	if _, ok := im.Topic(s.name); ok {
		return errf(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
	}
	if clash := collidingTopic(im, s.name); clash != "" {
		return errf(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' collide in metric names)", s.name, clash)
	}
	if validateOnly {
		return nil
	}
	recs := metadata.CreateTopicRecords(s.name, metadata.NewUUID(), s.assignment, s.configs)
	if err := lc.appendLocked(recs...); err != nil {
		if errors.Is(err, metadata.ErrTopicExists) {
			return errf(kerr.TopicAlreadyExists, "topic %q already exists", s.name)
		}
		return errf(kerr.UnknownServerError, "recording topic: %v", err)
	}
	return nil
}

// createdConfigs lists the topic's resulting configuration (v5+).
func (lc *LocalController) createdConfigs(s *topicSpec) []kmsg.CreateTopicsResponseTopicConfig {
	l := lc.layers(lc.store.Image(), "")
	l.Topic = s.configs
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(configs.TopicDefs))
	for _, d := range configs.TopicDefs {
		res := l.ResolveTopic(d, false)
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{Name: d.Name, Value: res.Value, Source: int8(res.Source)})
	}
	return out
}

// collidingTopic returns an existing topic whose name equals name once '.' and '_' are
// identified (Kafka refuses those), or "".
func collidingTopic(im *metadata.Image, name string) string {
	if other, ok := im.CollidingTopic(name); ok {
		return other
	}
	return ""
}

// ---- DeleteTopics ----

func (lc *LocalController) deleteTopics(req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	topics := req.Topics
	if len(topics) == 0 && len(req.TopicNames) > 0 { // v0-5 names
		topics = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			topics[i].Topic = &req.TopicNames[i]
		}
	}
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, err := lc.deleteOneLocked(t.Topic, t.TopicID)
		if name != "" {
			rt.Topic = &name // answered with the name also when deleted by id, as Kafka does
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteOneLocked deletes the topic named or identified; it returns the topic's name
// when found.
func (lc *LocalController) deleteOneLocked(name *string, id [16]byte) (string, error) {
	im := lc.store.Image()
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
	// RemoveTopicRecord takes the topic's partitions and config overrides with it.
	if err := lc.appendLocked(&metadata.RemoveTopicRecord{ID: t.ID}); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return t.Name, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Name)
		}
		return t.Name, errf(kerr.UnknownServerError, "recording deletion: %v", err)
	}
	return t.Name, nil
}

// ---- CreatePartitions ----

func (lc *LocalController) createPartitions(req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	var used int32
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		if seen[t.Topic] > 1 {
			err = errf(kerr.InvalidRequest, "topic %q given more than once", t.Topic)
		} else {
			err = lc.createPartitionsLocked(&t, req.ValidateOnly, &used)
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMsg(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (lc *LocalController) createPartitionsLocked(t *kmsg.CreatePartitionsRequestTopic, validateOnly bool, used *int32) error {
	ti, ok := lc.store.Image().Topic(t.Topic)
	if !ok {
		return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
	}
	have := int32(len(ti.Partitions))
	if t.Count <= have {
		return errf(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than or equal to the requested %d", have, t.Count)
	}
	add := int(t.Count - have)
	if add > int(lc.maxPartitionsPerOp-*used) {
		return errf(kerr.PolicyViolation, "excessively large number of partitions per request: %d more (at most %d per request)", add, lc.maxPartitionsPerOp)
	}
	*used += int32(add)
	if t.Assignment != nil && len(t.Assignment) != add {
		return errf(kerr.InvalidReplicaAssignment, "increasing the number of partitions by %d but %d assignments provided", add, len(t.Assignment))
	}
	for i := range add {
		if t.Assignment != nil {
			if err := lc.checkReplicas(t.Assignment[i].Replicas, int(have)+i); err != nil {
				return err
			}
		}
	}
	if validateOnly {
		return nil
	}
	assignment := make([][]int32, add)
	for i := range assignment {
		assignment[i] = []int32{lc.nodeID}
	}
	if err := lc.appendLocked(metadata.PartitionRecords(ti.ID, have, assignment)...); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
		}
		return errf(kerr.UnknownServerError, "recording partitions: %v", err)
	}
	return nil
}

// ---- AlterConfigs, IncrementalAlterConfigs ----

// alterTarget is a config resource being altered.
type alterTarget struct {
	name    string
	def     func(key string) *configs.Def
	rt      metadata.ResourceType
	wire    kmsg.ConfigResourceType
	current map[string]string // the resource's explicitly set keys (shared: read only)
	layers  configs.Layers
}

// resolveAlterTarget checks that the resource exists and may be altered.
func (lc *LocalController) resolveAlterTarget(im *metadata.Image, rtype kmsg.ConfigResourceType, name string) (*alterTarget, error) {
	t := &alterTarget{name: name, wire: rtype}
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := im.Topic(name); !ok {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		t.def, t.rt = configs.Topic, metadata.ResourceTopic
		t.layers = lc.layers(im, name)
		t.current = t.layers.Topic
	case kmsg.ConfigResourceTypeBroker:
		if name != "" && name != strconv.Itoa(int(lc.nodeID)) {
			return nil, errf(kerr.InvalidRequest, "broker %q is not this broker (%d)", name, lc.nodeID)
		}
		t.def, t.rt = configs.Broker, metadata.ResourceBroker
		t.layers = lc.layers(im, "")
		t.current = t.layers.Node
		if name == "" {
			t.current = t.layers.ClusterDefault
		}
	default:
		return nil, errf(kerr.InvalidRequest, "resource type %s is not supported", rtype)
	}
	return t, nil
}

// alterableDef returns the definition of key if it may be altered on t.
func (t *alterTarget) alterableDef(key string) (*configs.Def, error) {
	d := t.def(key)
	if d == nil {
		return nil, errf(kerr.InvalidConfig, "unknown config %q", key)
	}
	if d.ReadOnly {
		return nil, errf(kerr.InvalidConfig, "config %q cannot be updated dynamically", key)
	}
	return d, nil
}

// record returns the metadata record setting (value != nil) or deleting key.
func (t *alterTarget) record(key string, value *string) *metadata.ConfigRecord {
	return &metadata.ConfigRecord{Resource: t.rt, Name: t.name, Key: key, Value: value}
}

// commitConfigsLocked appends recs. Caller holds mu.
func (lc *LocalController) commitConfigsLocked(t *alterTarget, recs []metadata.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := lc.appendLocked(recs...); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.name)
		}
		return errf(kerr.UnknownServerError, "recording configs: %v", err)
	}
	return nil
}

func (lc *LocalController) alterConfigsLegacy(req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := kmsg.NewPtrAlterConfigsResponse()
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := lc.replaceConfigsLocked(&res, req.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (lc *LocalController) replaceConfigsLocked(res *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	t, err := lc.resolveAlterTarget(lc.store.Image(), res.ResourceType, res.ResourceName)
	if err != nil {
		return err
	}
	var recs []metadata.Record
	given := map[string]bool{}
	for _, c := range res.Configs {
		if given[c.Name] {
			return errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		given[c.Name] = true
		d, err := t.alterableDef(c.Name)
		if err != nil {
			return err
		}
		if c.Value == nil {
			return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
		}
		v, err := d.Validate(*c.Value)
		if err != nil {
			return errf(kerr.InvalidConfig, "%v", err)
		}
		if cur, ok := t.current[c.Name]; !ok || cur != v {
			recs = append(recs, t.record(c.Name, &v))
		}
	}
	keys := make([]string, 0, len(t.current))
	for k := range t.current {
		if !given[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		recs = append(recs, t.record(k, nil))
	}
	if validateOnly {
		return nil
	}
	return lc.commitConfigsLocked(t, recs)
}

func (lc *LocalController) incrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		err := lc.alterConfigsLocked(&res, req.ValidateOnly)
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMsg(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (lc *LocalController) alterConfigsLocked(res *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	t, err := lc.resolveAlterTarget(lc.store.Image(), res.ResourceType, res.ResourceName)
	if err != nil {
		return err
	}
	var recs []metadata.Record
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return errf(kerr.InvalidRequest, "config %q given more than once", c.Name)
		}
		seen[c.Name] = true
		d, err := t.alterableDef(c.Name)
		if err != nil {
			return err
		}
		var value *string
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := d.Validate(*c.Value)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		case kmsg.IncrementalAlterConfigOpDelete:
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.Kind != configs.KindList {
				return errf(kerr.InvalidConfig, "config %q is not a list: APPEND and SUBTRACT do not apply", c.Name)
			}
			if c.Value == nil {
				return errf(kerr.InvalidConfig, "null value for config %q", c.Name)
			}
			v, err := listOp(d, effective(&t.layers, t.wire, d), *c.Value, c.Op == kmsg.IncrementalAlterConfigOpAppend)
			if err != nil {
				return errf(kerr.InvalidConfig, "%v", err)
			}
			value = &v
		default:
			return errf(kerr.InvalidRequest, "unknown operation %d for config %q", c.Op, c.Name)
		}
		if value == nil {
			if _, ok := t.current[c.Name]; !ok {
				continue // deleting what is not set
			}
		}
		recs = append(recs, t.record(c.Name, value))
	}
	if validateOnly {
		return nil
	}
	return lc.commitConfigsLocked(t, recs)
}

// effective is the current value of d for the resource being altered.
func effective(l *configs.Layers, rt kmsg.ConfigResourceType, d *configs.Def) string {
	if rt == kmsg.ConfigResourceTypeTopic {
		if r := l.ResolveTopic(d, false); r.Value != nil {
			return *r.Value
		}
		return ""
	}
	if r, ok := l.ResolveBroker(d.Name, 1, nil); ok {
		return *r.Value
	}
	if d.Default != nil {
		return *d.Default
	}
	return ""
}

// listOp appends or subtracts the items of arg to or from the list cur.
func listOp(d *configs.Def, cur, arg string, add bool) (string, error) {
	var items []string
	for _, it := range strings.Split(cur, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	for _, it := range strings.Split(arg, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		i := slices.Index(items, it)
		switch {
		case add && i < 0:
			items = append(items, it)
		case !add && i >= 0:
			items = slices.Delete(items, i, i+1)
		}
	}
	return d.Validate(strings.Join(items, ","))
}

// ---- AllocateProducerIds ----

// producerIDBlock is Kafka's producer-id block size.
const producerIDBlock = 1000

func (lc *LocalController) allocateProducerIDs(req *kmsg.AllocateProducerIDsRequest) *kmsg.AllocateProducerIDsResponse {
	resp := kmsg.NewPtrAllocateProducerIDsResponse()
	if req.BrokerID != lc.nodeID {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	old := lc.store.Image()
	first, err := lc.store.AllocateProducerIDs(req.BrokerID, producerIDBlock)
	if err != nil {
		lc.log.Error("allocating producer ids", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	im, off := lc.store.Image(), lc.offsetLocked()
	for _, fn := range lc.subs {
		fn(off, old, im)
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlock
	return resp
}

// ---- ElectLeaders, reassignments, DescribeQuorum ----

// electLeaders: every partition is led by its only replica, this node, so there is no
// election to hold (ELECTION_NOT_NEEDED); unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
func (lc *LocalController) electLeaders(req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	im := lc.store.Image()
	topics := req.Topics
	if topics == nil {
		for _, t := range im.Topics() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = t.Name
			for p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, int32(p))
			}
			topics = append(topics, rt)
		}
	}
	for _, rt := range topics {
		out := kmsg.NewElectLeadersResponseTopic()
		out.Topic = rt.Topic
		t, ok := im.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			switch {
			case !ok || p < 0 || int(p) >= len(t.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case t.Partitions[p].Leader == t.Partitions[p].Replicas[0]:
				rp.ErrorCode = kerr.ElectionNotNeeded.Code
			default:
				rp.ErrorCode = kerr.EligibleLeadersNotAvailable.Code
			}
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// alterReassignments: on one node the only assignment is [this node], which every
// partition has: asking for it (or cancelling, with null replicas) changes nothing;
// any other assignment is INVALID_REPLICA_ASSIGNMENT.
func (lc *LocalController) alterReassignments(req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	im := lc.store.Image()
	for _, rt := range req.Topics {
		out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		out.Topic = rt.Topic
		t, ok := im.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !ok || p.Partition < 0 || int(p.Partition) >= len(t.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Replicas == nil:
				rp.ErrorCode = kerr.NoReassignmentInProgress.Code
			case !slices.Equal(p.Replicas, t.Partitions[p.Partition].Replicas):
				rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				rp.ErrorMessage = stringPtr(fmt.Sprintf("replicas %v: this one-node cluster has only broker %d", p.Replicas, lc.nodeID))
			}
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// listReassignments: none is ever in progress on one node.
func (lc *LocalController) listReassignments(*kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	return kmsg.NewPtrListPartitionReassignmentsResponse()
}

// describeQuorum describes the quorum of one: this node leads in term 1, its log
// ends at the store's offset, which is also the high watermark.
func (lc *LocalController) describeQuorum(req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	hw := int64(lc.offsetLocked()) + 1
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != metadataTopic || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = lc.nodeID, 1, hw
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = lc.nodeID, hw, -1, -1
				rp.CurrentVoters = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{rs}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
