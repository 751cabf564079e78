package metadata

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Image is the cluster metadata after some prefix of the log: topics and their
// partitions, configs, brokers, the next free producer id, SCRAM credentials and ACLs.
//
// An Image is immutable once Apply returns it, and safe for concurrent readers. Slices
// and maps it returns are shared with it: callers must not modify them. Apply copies
// only what a batch touches (the shards of the copy-on-write maps it changes, and each
// topic or config map it changes), so images that share history share memory and a
// batch costs about 1/32 of a copy of the whole image.
//
// The zero Image is the empty image.
type Image struct {
	topics         cowMap[string, *TopicImage]
	byID           cowMap[UUID, *TopicImage]
	configs        cowMap[configKey, map[string]string]
	brokers        map[int32]BrokerImage
	nextProducerID int64
	sec            securityState    // SCRAM credentials and ACLs (records_security.go)
	features       map[string]int16 // finalized feature levels above 0 (features.go)
	voters         []QuorumVoter    // the controller quorum's members (records_voters.go); nil at kraft.version 0

	sortedTopics atomic.Pointer[[]*TopicImage] // cache for Topics
}

type configKey struct {
	rt   ResourceType
	name string
}

// TopicImage is one topic. Partitions[i] is partition i; partitions are dense.
type TopicImage struct {
	Name       string
	ID         UUID
	Partitions []PartitionImage
}

// PartitionImage is one partition's assignment and leadership. Leader is -1 when the
// partition has no leader. Removing and Adding are the replicas a reassignment is
// removing and adding (both subsets of Replicas; nil when none). ELR and LastKnownELR
// are the eligible leader replicas and the last known leader (KIP-966, see
// PartitionRecord; nil when none): replicas, the ELR disjoint from the ISR. The ISR
// is empty only at eligible.leader.replicas.version 1, and then the partition has no
// leader.
type PartitionImage struct {
	Replicas, ISR       []int32
	Removing, Adding    []int32
	Leader, LeaderEpoch int32
	PartitionEpoch      int32
	LeaderRecoveryState int8
	ELR, LastKnownELR   []int32
}

// BrokerImage is a registered broker. Host and Port are its first endpoint's.
type BrokerImage struct {
	ID                   int32
	IncarnationID        UUID
	Epoch                int64
	Endpoints            []Endpoint
	Host                 string
	Port                 int32
	Rack                 *string
	Fenced               bool
	InControlledShutdown bool
	// Features are the feature levels it registered as supported (none: a broker of a
	// build before feature levels).
	Features []BrokerFeature
}

// Endpoint returns the broker's endpoint of listener name.
func (b BrokerImage) Endpoint(name string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Topic returns the topic called name.
func (im *Image) Topic(name string) (*TopicImage, bool) {
	return im.topics.get(name)
}

// TopicByID returns the topic with id.
func (im *Image) TopicByID(id UUID) (*TopicImage, bool) {
	return im.byID.get(id)
}

// Topics returns every topic, sorted by name. The slice is shared: do not modify it.
func (im *Image) Topics() []*TopicImage {
	if p := im.sortedTopics.Load(); p != nil {
		return *p
	}
	out := make([]*TopicImage, 0, im.topics.len())
	for _, t := range im.topics.all() {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *TopicImage) int { return strings.Compare(a.Name, b.Name) })
	im.sortedTopics.Store(&out)
	return out
}

// CollidingTopic returns an existing topic whose name equals name once '.' is read as
// '_' (Kafka refuses to create such a topic: the two would share metric names). A topic
// called exactly name is not a collision.
func (im *Image) CollidingTopic(name string) (string, bool) {
	norm := strings.ReplaceAll(name, ".", "_")
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	for other := range im.topics.all() {
		if other != name && len(other) == len(name) && strings.ReplaceAll(other, ".", "_") == norm {
			return other, true
		}
	}
	return "", false
}

// NumTopics returns the number of topics.
func (im *Image) NumTopics() int { return im.topics.len() }

// Configs returns the explicitly set config keys of a resource (nil if none). The map is
// shared: do not modify it.
func (im *Image) Configs(rt ResourceType, name string) map[string]string {
	m, _ := im.configs.get(configKey{rt, name})
	return m
}

// BrokerConfigNames returns the names of the broker config resources that have keys
// set ("" the cluster default, else broker ids), sorted.
func (im *Image) BrokerConfigNames() []string {
	var out []string
	for k := range im.configs.all() {
		if k.rt == ResourceBroker {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// NextProducerID returns the first producer id not yet handed out.
func (im *Image) NextProducerID() int64 { return im.nextProducerID }

// Brokers returns the registered brokers sorted by id.
func (im *Image) Brokers() []BrokerImage {
	out := make([]BrokerImage, 0, len(im.brokers))
	for _, b := range im.brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b BrokerImage) int { return int(a.ID) - int(b.ID) })
	return out
}

// Broker returns the broker with id.
func (im *Image) Broker(id int32) (BrokerImage, bool) {
	b, ok := im.brokers[id]
	return b, ok
}

// UnfencedBrokers returns the ids of the registered brokers that are not fenced,
// sorted: the brokers that may lead partitions and receive new replicas.
func (im *Image) UnfencedBrokers() []int32 {
	out := make([]int32, 0, len(im.brokers))
	for id, b := range im.brokers {
		if !b.Fenced {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// MaxBrokerEpoch returns the largest epoch among the registered brokers (0 if none).
func (im *Image) MaxBrokerEpoch() int64 {
	var m int64
	for _, b := range im.brokers {
		m = max(m, b.Epoch)
	}
	return m
}

// Records returns records that rebuild im when applied to the empty image, in a
// canonical order: the finalized feature levels (metadata.version first), the quorum's
// voters, brokers by epoch (then id: Apply wants each registration's epoch
// above every earlier one's), each topic by name with its partitions and configs;
// broker configs by name and key; group configs by group and key; the producer-id
// watermark. Snapshots are made of them.
func (im *Image) Records() []Record {
	out := append(im.featureRecords(), im.votersRecords()...)
	brokers := im.Brokers()
	slices.SortStableFunc(brokers, func(a, b BrokerImage) int { return cmp.Compare(a.Epoch, b.Epoch) })
	for _, b := range brokers {
		out = append(out, &RegisterBrokerRecord{ID: b.ID, IncarnationID: b.IncarnationID, Epoch: b.Epoch,
			Endpoints: b.Endpoints, Rack: b.Rack, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown, Features: b.Features})
	}
	appendConfigs := func(rt ResourceType, name string) {
		m, _ := im.configs.get(configKey{rt, name})
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, &ConfigRecord{Resource: rt, Name: name, Key: k, Value: StringPtr(m[k])})
		}
	}
	for _, t := range im.Topics() {
		out = append(out, &TopicRecord{Name: t.Name, ID: t.ID})
		for i, p := range t.Partitions {
			out = append(out, &PartitionRecord{TopicID: t.ID, Partition: int32(i), Replicas: p.Replicas,
				ISR: p.ISR, Removing: p.Removing, Adding: p.Adding, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, LeaderRecoveryState: p.LeaderRecoveryState, ELR: p.ELR, LastKnownELR: p.LastKnownELR})
		}
		appendConfigs(ResourceTopic, t.Name)
	}
	var brokerNames, groupNames []string
	for k := range im.configs.all() {
		switch k.rt {
		case ResourceBroker:
			brokerNames = append(brokerNames, k.name)
		case ResourceGroup:
			groupNames = append(groupNames, k.name)
		}
	}
	slices.Sort(brokerNames)
	for _, n := range brokerNames {
		appendConfigs(ResourceBroker, n)
	}
	slices.Sort(groupNames)
	for _, n := range groupNames {
		appendConfigs(ResourceGroup, n)
	}
	if im.nextProducerID > 0 {
		out = append(out, &ProducerIDsRecord{BrokerID: -1, NextProducerID: im.nextProducerID})
	}
	out = append(out, im.securityRecords()...)
	return out
}

// Apply is the state machine: it validates recs in order against im and returns the
// image after all of them, or the first error (wrapping ErrInvalidRecord, ErrTopicExists
// or ErrUnknownTopic) and no image. im is never changed. Apply does no I/O and reads no
// clock: the same image and records always give the same result.
func (im *Image) Apply(recs ...Record) (*Image, error) {
	b := newBuilder(im)
	for i, r := range recs {
		if err := b.apply(r); err != nil {
			return nil, fmt.Errorf("record %d (%T): %w", i, r, err)
		}
	}
	return b.im, nil
}

// builder applies one batch, copying each shared structure the first time it changes.
type builder struct {
	base           *Image
	im             *Image
	ownTopics      uint32 // shards of im.topics this batch copied
	ownIDs         uint32 // shards of im.byID
	ownConfigs     uint32 // shards of im.configs
	brokersCopied  bool
	featuresCopied bool
	ownTopicImages map[*TopicImage]bool
	ownConfigMaps  map[configKey]bool
	secOwn         securityOwned
}

func newBuilder(im *Image) *builder {
	return &builder{base: im, im: &Image{
		topics:         im.topics,
		byID:           im.byID,
		configs:        im.configs,
		brokers:        im.brokers,
		nextProducerID: im.nextProducerID,
		sec:            im.sec,
		features:       im.features,
		voters:         im.voters,
	}}
}

// mutableTopic returns a copy of t this batch may modify, installed in the maps.
func (b *builder) mutableTopic(t *TopicImage) *TopicImage {
	if b.ownTopicImages[t] {
		return t
	}
	c := &TopicImage{Name: t.Name, ID: t.ID, Partitions: slices.Clone(t.Partitions)}
	b.putTopic(c)
	return c
}

// putTopic installs t, which this batch owns, under its name and id.
func (b *builder) putTopic(t *TopicImage) {
	b.im.topics.set(t.Name, t, &b.ownTopics)
	b.im.byID.set(t.ID, t, &b.ownIDs)
	if b.ownTopicImages == nil {
		b.ownTopicImages = make(map[*TopicImage]bool)
	}
	b.ownTopicImages[t] = true
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// isNil reports whether r is nil or a nil pointer of a record type.
func isNil(r Record) bool {
	switch r := r.(type) {
	case nil:
		return true
	case *TopicRecord:
		return r == nil
	case *PartitionRecord:
		return r == nil
	case *RemoveTopicRecord:
		return r == nil
	case *ConfigRecord:
		return r == nil
	case *ProducerIDsRecord:
		return r == nil
	case *RegisterBrokerRecord:
		return r == nil
	case *PartitionChangeRecord:
		return r == nil
	case *UnregisterBrokerRecord:
		return r == nil
	case *BrokerRegistrationChangeRecord:
		return r == nil
	case *FeatureLevelRecord:
		return r == nil
	case *VotersRecord:
		return r == nil
	case *ClearElrRecord:
		return r == nil
	case securityRecord:
		return isNilSecurity(r)
	}
	return false
}

func (b *builder) apply(r Record) error {
	if isNil(r) {
		return fmt.Errorf("%w: nil record", ErrInvalidRecord)
	}
	switch r := r.(type) {
	case *TopicRecord:
		return b.topic(r)
	case *PartitionRecord:
		return b.partition(r)
	case *RemoveTopicRecord:
		t, ok := b.im.byID.get(r.ID)
		if !ok {
			return fmt.Errorf("%w: id %s", ErrUnknownTopic, r.ID)
		}
		b.im.topics.del(t.Name, &b.ownTopics)
		b.im.byID.del(t.ID, &b.ownIDs)
		b.im.configs.del(configKey{ResourceTopic, t.Name}, &b.ownConfigs)
		return nil
	case *ConfigRecord:
		return b.config(r)
	case *ProducerIDsRecord:
		if r.NextProducerID <= b.im.nextProducerID {
			return fmt.Errorf("%w: next producer id %d does not pass %d", ErrInvalidRecord, r.NextProducerID, b.im.nextProducerID)
		}
		b.im.nextProducerID = r.NextProducerID
		return nil
	case *RegisterBrokerRecord:
		return b.registerBroker(r)
	case *UnregisterBrokerRecord:
		cur, ok := b.im.brokers[r.ID]
		if !ok || cur.Epoch != r.Epoch {
			return fmt.Errorf("%w: unregister broker %d epoch %d: not its registration", ErrInvalidRecord, r.ID, r.Epoch)
		}
		b.copyBrokers()
		delete(b.im.brokers, r.ID)
		return nil
	case *BrokerRegistrationChangeRecord:
		cur, ok := b.im.brokers[r.ID]
		if !ok || cur.Epoch != r.Epoch {
			return fmt.Errorf("%w: broker %d epoch %d: not its registration", ErrInvalidRecord, r.ID, r.Epoch)
		}
		switch r.Fenced {
		case FenceFence:
			cur.Fenced = true
		case FenceUnfence:
			cur.Fenced = false
		case FenceKeep:
		default:
			return fmt.Errorf("%w: broker %d: fenced change %d", ErrInvalidRecord, r.ID, r.Fenced)
		}
		switch r.InControlledShutdown {
		case 1:
			cur.InControlledShutdown = true
		case 0:
		default:
			return fmt.Errorf("%w: broker %d: controlled shutdown change %d", ErrInvalidRecord, r.ID, r.InControlledShutdown)
		}
		b.copyBrokers()
		b.im.brokers[r.ID] = cur
		return nil
	case *PartitionChangeRecord:
		return b.partitionChange(r)
	case *FeatureLevelRecord:
		return b.featureLevel(r)
	case *VotersRecord:
		return b.applyVoters(r)
	case *ClearElrRecord:
		return b.clearElr(r)
	case securityRecord:
		return b.applySecurity(r)
	}
	return fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
}

func (b *builder) copyBrokers() {
	if !b.brokersCopied {
		b.im.brokers = cloneMap(b.im.brokers)
		b.brokersCopied = true
	}
}

func (b *builder) registerBroker(r *RegisterBrokerRecord) error {
	if r.ID < 0 || len(r.Endpoints) == 0 {
		return fmt.Errorf("%w: broker %d with %d endpoints", ErrInvalidRecord, r.ID, len(r.Endpoints))
	}
	for i, e := range r.Endpoints {
		if e.Name == "" || e.Host == "" || e.Port <= 0 || e.Port > 65535 {
			return fmt.Errorf("%w: broker %d endpoint %q at %q:%d", ErrInvalidRecord, r.ID, e.Name, e.Host, e.Port)
		}
		for _, o := range r.Endpoints[:i] {
			if o.Name == e.Name {
				return fmt.Errorf("%w: broker %d: endpoint %q listed twice", ErrInvalidRecord, r.ID, e.Name)
			}
		}
	}
	if r.Epoch < 0 {
		return fmt.Errorf("%w: broker %d epoch %d", ErrInvalidRecord, r.ID, r.Epoch)
	}
	if err := validBrokerFeatures(r.Features); err != nil {
		return fmt.Errorf("%w: broker %d: %v", ErrInvalidRecord, r.ID, err)
	}
	if r.Epoch != 0 {
		if m := b.im.MaxBrokerEpoch(); r.Epoch <= m {
			return fmt.Errorf("%w: broker %d epoch %d does not pass %d", ErrInvalidRecord, r.ID, r.Epoch, m)
		}
	}
	b.copyBrokers()
	bi := BrokerImage{ID: r.ID, IncarnationID: r.IncarnationID, Epoch: r.Epoch,
		Endpoints: slices.Clone(r.Endpoints), Host: r.Endpoints[0].Host, Port: r.Endpoints[0].Port,
		Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown, Features: slices.Clone(r.Features)}
	if r.Rack != nil {
		bi.Rack = StringPtr(*r.Rack)
	}
	b.im.brokers[r.ID] = bi
	return nil
}

func (b *builder) topic(r *TopicRecord) error {
	if err := ValidTopicName(r.Name); err != nil {
		return err
	}
	if !r.ID.ValidTopicID() {
		return fmt.Errorf("%w: topic id %s is reserved", ErrInvalidRecord, r.ID)
	}
	if _, ok := b.im.topics.get(r.Name); ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, r.Name)
	}
	if t, ok := b.im.byID.get(r.ID); ok {
		return fmt.Errorf("%w: topic id %s already names %q", ErrInvalidRecord, r.ID, t.Name)
	}
	b.putTopic(&TopicImage{Name: r.Name, ID: r.ID})
	return nil
}

func (b *builder) partition(r *PartitionRecord) error {
	t, ok := b.im.byID.get(r.TopicID)
	if !ok {
		return fmt.Errorf("%w: id %s", ErrUnknownTopic, r.TopicID)
	}
	if r.Partition < 0 || int(r.Partition) > len(t.Partitions) {
		return fmt.Errorf("%w: partition %d of %q (has %d): partitions are dense", ErrInvalidRecord, r.Partition, t.Name, len(t.Partitions))
	}
	if err := validAssignment(r); err != nil {
		return fmt.Errorf("%w: partition %d of %q: %v", ErrInvalidRecord, r.Partition, t.Name, err)
	}
	if err := b.elrAllowed(r, false); err != nil {
		return fmt.Errorf("%w: partition %d of %q: %v", ErrInvalidRecord, r.Partition, t.Name, err)
	}
	if int(r.Partition) < len(t.Partitions) && r.LeaderEpoch < t.Partitions[r.Partition].LeaderEpoch {
		return fmt.Errorf("%w: partition %d of %q: leader epoch %d below %d", ErrInvalidRecord,
			r.Partition, t.Name, r.LeaderEpoch, t.Partitions[r.Partition].LeaderEpoch)
	}
	t = b.mutableTopic(t)
	p := PartitionImage{Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
		Removing: cloneOrNil(r.Removing), Adding: cloneOrNil(r.Adding), Leader: r.Leader, LeaderEpoch: r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch, LeaderRecoveryState: r.LeaderRecoveryState,
		ELR: cloneOrNil(r.ELR), LastKnownELR: cloneOrNil(r.LastKnownELR)}
	if int(r.Partition) == len(t.Partitions) {
		t.Partitions = append(t.Partitions, p)
	} else {
		t.Partitions[r.Partition] = p
	}
	return nil
}

func cloneOrNil(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

// partitionChange applies a PartitionChangeRecord to a live partition.
func (b *builder) partitionChange(r *PartitionChangeRecord) error {
	t, ok := b.im.byID.get(r.TopicID)
	if !ok {
		return fmt.Errorf("%w: id %s", ErrUnknownTopic, r.TopicID)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: partition change of %q partition %d (has %d)", ErrInvalidRecord, t.Name, r.Partition, len(t.Partitions))
	}
	p := t.Partitions[r.Partition]
	next := PartitionRecord{TopicID: r.TopicID, Partition: r.Partition, Replicas: p.Replicas, ISR: p.ISR,
		Removing: p.Removing, Adding: p.Adding, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch + 1, LeaderRecoveryState: p.LeaderRecoveryState,
		ELR: p.ELR, LastKnownELR: p.LastKnownELR}
	if r.ISR != nil {
		next.ISR = r.ISR
	}
	if r.ELR != nil {
		next.ELR = r.ELR
	}
	if r.LastKnownELR != nil {
		next.LastKnownELR = r.LastKnownELR
	}
	if r.Replicas != nil {
		next.Replicas = r.Replicas
	}
	if r.Removing != nil {
		next.Removing = r.Removing
	}
	if r.Adding != nil {
		next.Adding = r.Adding
	}
	switch r.Leader {
	case NoLeaderChange:
	default:
		if r.Leader < -1 {
			return fmt.Errorf("%w: partition %d of %q: leader %d", ErrInvalidRecord, r.Partition, t.Name, r.Leader)
		}
		// A leader named, even the same one, starts a new leader epoch (Kafka's
		// PartitionRegistration.merge): the controller names the same leader to fence
		// what the replicas a reassignment removed may still send in the old epoch.
		next.Leader, next.LeaderEpoch = r.Leader, p.LeaderEpoch+1
	}
	switch r.LeaderRecoveryState {
	case -1:
	case LeaderRecovered, LeaderRecovering:
		next.LeaderRecoveryState = r.LeaderRecoveryState
	default:
		return fmt.Errorf("%w: partition %d of %q: leader recovery state %d", ErrInvalidRecord, r.Partition, t.Name, r.LeaderRecoveryState)
	}
	if err := validAssignment(&next); err != nil {
		return fmt.Errorf("%w: partition %d of %q: %v", ErrInvalidRecord, r.Partition, t.Name, err)
	}
	if err := b.elrAllowed(&next, true); err != nil {
		return fmt.Errorf("%w: partition %d of %q: %v", ErrInvalidRecord, r.Partition, t.Name, err)
	}
	t = b.mutableTopic(t)
	t.Partitions[r.Partition] = PartitionImage{Replicas: slices.Clone(next.Replicas), ISR: cloneOrNil(next.ISR),
		Removing: cloneOrNil(next.Removing), Adding: cloneOrNil(next.Adding), Leader: next.Leader, LeaderEpoch: next.LeaderEpoch,
		PartitionEpoch: next.PartitionEpoch, LeaderRecoveryState: next.LeaderRecoveryState,
		ELR: cloneOrNil(next.ELR), LastKnownELR: cloneOrNil(next.LastKnownELR)}
	return nil
}

// elrAllowed checks what only eligible.leader.replicas.version 1 allows: an ELR or
// last known ELR, and a change that empties the ISR (every ISR member left).
func (b *builder) elrAllowed(r *PartitionRecord, change bool) error {
	if b.im.ELREnabled() {
		return nil
	}
	switch {
	case len(r.ELR) > 0 || len(r.LastKnownELR) > 0:
		return fmt.Errorf("ELR %v, last known ELR %v while %s is 0", r.ELR, r.LastKnownELR, FeatureELRVersion)
	case change && len(r.ISR) == 0:
		return fmt.Errorf("empty ISR while %s is 0", FeatureELRVersion)
	}
	return nil
}

// clearElr applies a ClearElrRecord: the ELR and last known ELR of every partition of
// the topic (every topic when the name is empty) are cleared; each partition that had
// one takes a new partition epoch (Kafka's PartitionRegistration.merge).
func (b *builder) clearElr(r *ClearElrRecord) error {
	var topics []*TopicImage
	if r.TopicName != "" {
		t, ok := b.im.topics.get(r.TopicName)
		if !ok {
			return fmt.Errorf("%w: clearing the ELRs of %q", ErrUnknownTopic, r.TopicName)
		}
		topics = []*TopicImage{t}
	} else {
		for _, t := range b.im.topics.all() {
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		has := slices.ContainsFunc(t.Partitions, func(p PartitionImage) bool { return len(p.ELR) > 0 || len(p.LastKnownELR) > 0 })
		if !has {
			continue
		}
		t = b.mutableTopic(t)
		for i := range t.Partitions {
			if p := &t.Partitions[i]; len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
				p.ELR, p.LastKnownELR = nil, nil
				p.PartitionEpoch++
			}
		}
	}
	return nil
}

func validAssignment(r *PartitionRecord) error {
	if len(r.Replicas) == 0 {
		return fmt.Errorf("no replicas")
	}
	for _, set := range []struct {
		name string
		v    []int32
	}{{"removing", r.Removing}, {"adding", r.Adding}} {
		for i, x := range set.v {
			if !slices.Contains(r.Replicas, x) || slices.Contains(set.v[:i], x) {
				return fmt.Errorf("%s replica %d is not a replica or listed twice", set.name, x)
			}
		}
	}
	if r.PartitionEpoch < 0 {
		return fmt.Errorf("partition epoch %d", r.PartitionEpoch)
	}
	for i, x := range r.Replicas {
		if x < 0 {
			return fmt.Errorf("replica %d", x)
		}
		if slices.Contains(r.Replicas[:i], x) {
			return fmt.Errorf("replica %d listed twice", x)
		}
	}
	for i, x := range r.ISR {
		if !slices.Contains(r.Replicas, x) {
			return fmt.Errorf("ISR member %d is not a replica", x)
		}
		if slices.Contains(r.ISR[:i], x) {
			return fmt.Errorf("ISR member %d listed twice", x)
		}
	}
	if r.Leader != -1 && !slices.Contains(r.ISR, r.Leader) {
		return fmt.Errorf("leader %d not in the ISR", r.Leader)
	}
	for _, set := range []struct {
		name string
		v    []int32
	}{{"ELR", r.ELR}, {"last known ELR", r.LastKnownELR}} {
		for i, x := range set.v {
			if !slices.Contains(r.Replicas, x) || slices.Contains(set.v[:i], x) {
				return fmt.Errorf("%s member %d is not a replica or listed twice", set.name, x)
			}
		}
	}
	for _, x := range r.ELR {
		if slices.Contains(r.ISR, x) {
			return fmt.Errorf("ELR member %d is in the ISR", x)
		}
	}
	if r.LeaderEpoch < 0 {
		return fmt.Errorf("leader epoch %d", r.LeaderEpoch)
	}
	return nil
}

func (b *builder) config(r *ConfigRecord) error {
	switch r.Resource {
	case ResourceTopic:
		if _, ok := b.im.topics.get(r.Name); !ok {
			return fmt.Errorf("%w: config for %q", ErrUnknownTopic, r.Name)
		}
	case ResourceBroker:
		if r.Name != "" {
			id, err := strconv.ParseInt(r.Name, 10, 32)
			if err != nil || id < 0 || strconv.FormatInt(id, 10) != r.Name {
				return fmt.Errorf("%w: broker config resource %q is not a broker id", ErrInvalidRecord, r.Name)
			}
		}
	case ResourceGroup:
		if r.Name == "" {
			return fmt.Errorf("%w: group config resource with an empty name", ErrInvalidRecord)
		}
	default:
		return fmt.Errorf("%w: config resource type %d", ErrInvalidRecord, r.Resource)
	}
	if r.Key == "" {
		return fmt.Errorf("%w: empty config key", ErrInvalidRecord)
	}
	k := configKey{r.Resource, r.Name}
	cur, _ := b.im.configs.get(k)
	if r.Value == nil {
		if _, ok := cur[r.Key]; !ok {
			return nil // deleting an unset key is a no-op
		}
	}
	if !b.ownConfigMaps[k] || cur == nil {
		cur = cloneMap(cur)
		if b.ownConfigMaps == nil {
			b.ownConfigMaps = make(map[configKey]bool)
		}
		b.ownConfigMaps[k] = true
	}
	if r.Value == nil {
		delete(cur, r.Key)
	} else {
		cur[r.Key] = *r.Value
	}
	if len(cur) == 0 {
		b.im.configs.del(k, &b.ownConfigs)
	} else {
		b.im.configs.set(k, cur, &b.ownConfigs)
	}
	return nil
}
