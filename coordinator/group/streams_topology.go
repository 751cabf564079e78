package group

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A streams group's topology, as its members send it when they join, and its
// configuration against the cluster's topics (Kafka's InternalTopicManager):
//
//	topology (StreamsGroupTopologyValue)          topics image
//	        │                                          │
//	        └──────────────▶ configure ◀───────────────┘
//	                            │
//	   source topics missing ───┼──▶ MISSING_SOURCE_TOPICS (no tasks)
//	   repartition topics: fixed counts, else the largest input of the subtopologies
//	   writing them (a fix point); co-partition groups made equal; changelogs: the
//	   subtopology's task count
//	   an existing internal topic of another count ──▶ INCORRECTLY_PARTITIONED_TOPICS
//	   internal topics absent ──▶ MISSING_INTERNAL_TOPICS (+ the topics to create)
//	   else ready: each subtopology has max(partitions of its sources) tasks
//
// SourceTopics of a subtopology are read as its external source topics: a name that is
// also a repartition source topic (of any subtopology) is taken as the repartition topic.

// Status codes of a StreamsGroupHeartbeat answer (KIP-1071).
const (
	streamsStatusStaleTopology                = 0
	streamsStatusMissingSourceTopics          = 1
	streamsStatusIncorrectlyPartitionedTopics = 2
	streamsStatusMissingInternalTopics        = 3
	streamsStatusShutdownApplication          = 4
)

// Kafka Streams' own defaults for the internal topics it creates (its
// RepartitionTopicConfig and UnwindowedUnversionedChangelogTopicConfig), applied under
// the configs a member sent.
var (
	repartitionTopicDefaults = []StreamsKeyValue{
		{"cleanup.policy", "delete"}, {"message.timestamp.type", "CreateTime"},
		{"retention.ms", "-1"}, {"segment.bytes", "52428800"},
	}
	changelogTopicDefaults = []StreamsKeyValue{
		{"cleanup.policy", "compact"}, {"message.timestamp.type", "CreateTime"},
	}
)

// topologyFromRequest is the topology a joining member sent, subtopologies sorted by
// id (the lists inside keep their order: co-partition groups index them).
func topologyFromRequest(t *kmsg.StreamsGroupHeartbeatRequestTopology) *StreamsTopologyValue {
	info := func(ts []kmsg.TopicInfo) []StreamsTopicInfo {
		out := make([]StreamsTopicInfo, 0, len(ts))
		for _, t := range ts {
			ti := StreamsTopicInfo{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor, Configs: []StreamsKeyValue{}}
			for _, c := range t.Configs {
				ti.Configs = append(ti.Configs, StreamsKeyValue{c.Key, c.Value})
			}
			out = append(out, ti)
		}
		return out
	}
	strs := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return slices.Clone(s)
	}
	ints := func(s []int16) []int16 {
		if s == nil {
			return []int16{}
		}
		return slices.Clone(s)
	}
	v := &StreamsTopologyValue{Epoch: t.Epoch, Subtopologies: make([]StreamsSubtopologyValue, 0, len(t.Subtopologies))}
	for _, s := range t.Subtopologies {
		sv := StreamsSubtopologyValue{
			ID: s.SubtopologyID, SourceTopics: strs(s.SourceTopics), SourceTopicRegex: strs(s.SourceTopicRegex),
			StateChangelogTopics: info(s.StateChangelogTopics), RepartitionSinkTopics: strs(s.RepartitionSinkTopics),
			RepartitionSourceTopics: info(s.RepartitionSourceTopics), CopartitionGroups: []StreamsCopartitionGroup{},
		}
		for _, g := range s.CopartitionGroups {
			sv.CopartitionGroups = append(sv.CopartitionGroups, StreamsCopartitionGroup{
				SourceTopics: ints(g.SourceTopics), SourceTopicRegex: ints(g.SourceTopicRegex), RepartitionSourceTopics: ints(g.RepartitionSourceTopics),
			})
		}
		v.Subtopologies = append(v.Subtopologies, sv)
	}
	sort.SliceStable(v.Subtopologies, func(i, j int) bool { return v.Subtopologies[i].ID < v.Subtopologies[j].ID })
	return v
}

// topologyEqual reports whether two topologies are the same, epochs included.
func topologyEqual(a, b *StreamsTopologyValue) bool {
	if a == nil || b == nil {
		return a == b
	}
	return string(appendStreamsTopologyValue(nil, a)) == string(appendStreamsTopologyValue(nil, b))
}

// repartitionSourceNames is every repartition source topic of t.
func repartitionSourceNames(t *StreamsTopologyValue) map[string]bool {
	out := map[string]bool{}
	for _, s := range t.Subtopologies {
		for _, r := range s.RepartitionSourceTopics {
			out[r.Name] = true
		}
	}
	return out
}

// externalSources is a subtopology's source topics less the repartition topics.
func externalSources(s *StreamsSubtopologyValue, repartition map[string]bool) []string {
	var out []string
	for _, n := range s.SourceTopics {
		if !repartition[n] {
			out = append(out, n)
		}
	}
	return out
}

// requiredTopics is every topic t names: sources, repartition and changelog topics.
func requiredTopics(t *StreamsTopologyValue) []string {
	set := map[string]bool{}
	for _, s := range t.Subtopologies {
		for _, n := range s.SourceTopics {
			set[n] = true
		}
		for _, n := range s.RepartitionSinkTopics {
			set[n] = true
		}
		for _, r := range s.RepartitionSourceTopics {
			set[r.Name] = true
		}
		for _, c := range s.StateChangelogTopics {
			set[c.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// StreamsTopologyTopics returns every topic a StreamsGroupHeartbeat's topology names
// (source, repartition and changelog topics), sorted, for the broker's checks of them
// (names, internal topics, DESCRIBE ACLs) before the request reaches the coordinator.
func StreamsTopologyTopics(t *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	if t == nil {
		return nil
	}
	return requiredTopics(topologyFromRequest(t))
}

// validateTopology checks what of a topology does not depend on the cluster's topics,
// as Kafka's coordinator does when it first configures it: STREAMS_INVALID_TOPOLOGY for
// a changelog topic with a partition count, a duplicate subtopology, a co-partition
// index out of range, a subtopology without source topics, or repartition topics whose
// partition count cannot be derived (never written by a subtopology, or written only in
// a loop); INVALID_REQUEST for source topic regular expressions (not supported, as
// Kafka 4.2).
func validateTopology(t *StreamsTopologyValue) (int16, string) {
	invalid := func(f string, args ...any) (int16, string) {
		return kerr.StreamsInvalidTopology.Code, fmt.Sprintf(f, args...)
	}
	seen := map[string]bool{}
	for _, s := range t.Subtopologies {
		if len(s.SourceTopicRegex) > 0 {
			return kerr.InvalidRequest.Code, "Regular expressions for source topics are not supported yet."
		}
		if seen[s.ID] {
			return invalid("Duplicate subtopology %s.", s.ID)
		}
		seen[s.ID] = true
		for _, c := range s.StateChangelogTopics {
			if c.Partitions != 0 {
				return invalid("Changelog topic %s must have an undefined partition count, but it is set to %d.", c.Name, c.Partitions)
			}
		}
		if len(s.SourceTopics) == 0 && len(s.RepartitionSourceTopics) == 0 {
			return invalid("No source topics found for subtopology %s.", s.ID)
		}
		for _, g := range s.CopartitionGroups {
			for _, i := range g.SourceTopics {
				if i < 0 || int(i) >= len(s.SourceTopics) {
					return invalid("Co-partition group of subtopology %s has source topic index %d out of range.", s.ID, i)
				}
			}
			for _, i := range g.RepartitionSourceTopics {
				if i < 0 || int(i) >= len(s.RepartitionSourceTopics) {
					return invalid("Co-partition group of subtopology %s has repartition source topic index %d out of range.", s.ID, i)
				}
			}
		}
	}
	// Every external source counts as known: what remains undecided is structural.
	_, err := repartitionCounts(t, func(string) (int32, bool) { return 1, true })
	if err != "" {
		return invalid("%s", err)
	}
	return 0, ""
}

// repartitionCounts decides the partition count of every repartition topic: the count
// the topology fixes, else the largest input (external or repartition source, known so
// far) of a subtopology writing it, to a fix point. count gives an external topic's
// partitions. err is set when some repartition source topic stays undecided.
func repartitionCounts(t *StreamsTopologyValue, count func(string) (int32, bool)) (map[string]int32, string) {
	repartition := repartitionSourceNames(t)
	decided := map[string]int32{}
	for _, s := range t.Subtopologies {
		for _, r := range s.RepartitionSourceTopics {
			if r.Partitions != 0 {
				decided[r.Name] = r.Partitions
			}
		}
	}
	for {
		needed, progress := false, false
		for i := range t.Subtopologies {
			s := &t.Subtopologies[i]
			for _, sink := range s.RepartitionSinkTopics {
				if _, ok := decided[sink]; ok {
					continue
				}
				n := int32(-1)
				for _, r := range s.RepartitionSourceTopics {
					if c, ok := decided[r.Name]; ok {
						n = max(n, c)
					}
				}
				for _, src := range externalSources(s, repartition) {
					if c, ok := count(src); ok {
						n = max(n, c)
					}
				}
				if n < 0 {
					needed = true
					continue
				}
				decided[sink] = n
				progress = true
			}
		}
		if !needed {
			break
		}
		if !progress {
			return nil, "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."
		}
	}
	for name := range repartition {
		if _, ok := decided[name]; !ok {
			return nil, "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."
		}
	}
	return decided, ""
}

// configuredSub is one subtopology configured against the cluster's topics.
type configuredSub struct {
	tasks              int32
	sources            []string         // external source topics
	repartitionSources map[string]int32 // name -> partitions
	repartitionSinks   []string
	changelogs         map[string]int32 // name -> partitions (source-topic changelogs left out)
}

// configuredTopology is a topology configured against a topic image (Kafka's
// ConfiguredTopology). It is ready (status -1) when every topic exists with the
// partitions it should have; subs is nil when the configuration failed (missing source
// topics, incorrectly partitioned topics).
type configuredTopology struct {
	epoch   int32
	subs    map[string]*configuredSub
	status  int8 // a streamsStatus code, -1 when ready
	detail  string
	missing []StreamsTopicInfo // the internal topics to create (MISSING_INTERNAL_TOPICS)
}

func (ct *configuredTopology) ready() bool { return ct != nil && ct.status < 0 }

// summarizeTopics names topics in a status detail (sorted).
func summarizeTopics(ts []string) string {
	ts = slices.Clone(ts)
	sort.Strings(ts)
	return strings.Join(ts, ", ")
}

// configureTopology configures t against im (Kafka's InternalTopicManager.configureTopics)
// in four phases: the source topics must exist; the partition counts of the internal
// topics are decided; the subtopologies get their task counts and their internal
// topics; the internal topics that exist must have the decided counts.
func configureTopology(t *StreamsTopologyValue, im *topicImage) *configuredTopology {
	fail := func(status int8, detail string) *configuredTopology {
		return &configuredTopology{epoch: t.Epoch, status: status, detail: detail}
	}
	repartition := repartitionSourceNames(t)
	if missing := missingSources(t, repartition, im); len(missing) > 0 {
		return fail(streamsStatusMissingSourceTopics, fmt.Sprintf("Source topics %s are missing.", summarizeTopics(missing)))
	}
	countOf, decided, detail := decideCounts(t, repartition, im)
	if detail != "" {
		return fail(streamsStatusIncorrectlyPartitionedTopics, detail)
	}
	ct := &configuredTopology{epoch: t.Epoch, status: -1, subs: map[string]*configuredSub{}}
	var toCreate []StreamsTopicInfo
	for i := range t.Subtopologies {
		s := &t.Subtopologies[i]
		cs, create := configureSub(s, repartition, countOf, decided)
		ct.subs[s.ID] = cs
		toCreate = append(toCreate, create...)
	}
	var missing []StreamsTopicInfo
	var names []string
	seen := map[string]bool{}
	for _, want := range toCreate {
		if seen[want.Name] {
			continue
		}
		seen[want.Name] = true
		if ti, ok := im.byName[want.Name]; ok {
			if ti.Partitions != want.Partitions {
				return fail(streamsStatusIncorrectlyPartitionedTopics, fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d", want.Name, want.Partitions, ti.Partitions))
			}
			continue
		}
		missing = append(missing, want)
		names = append(names, want.Name)
	}
	if len(missing) > 0 {
		ct.status, ct.detail, ct.missing = streamsStatusMissingInternalTopics, "Internal topics are missing: "+summarizeTopics(names), missing
	}
	return ct
}

// missingSources is the external source topics of t that im lacks.
func missingSources(t *StreamsTopologyValue, repartition map[string]bool, im *topicImage) []string {
	var missing []string
	for i := range t.Subtopologies {
		for _, src := range externalSources(&t.Subtopologies[i], repartition) {
			if _, ok := im.byName[src]; !ok && !slices.Contains(missing, src) {
				missing = append(missing, src)
			}
		}
	}
	return missing
}

// decideCounts decides the partition counts of t's repartition topics (repartitionCounts,
// then its co-partition groups made equal: Kafka's CopartitionedTopicsEnforcer). countOf
// is a topic's count: the cluster's when the topic exists, else the decided one. detail
// is set when the topics cannot be co-partitioned (INCORRECTLY_PARTITIONED_TOPICS).
func decideCounts(t *StreamsTopologyValue, repartition map[string]bool, im *topicImage) (countOf func(string) (int32, bool), decided map[string]int32, detail string) {
	imageCount := func(name string) (int32, bool) {
		ti, ok := im.byName[name]
		return ti.Partitions, ok
	}
	decided, err := repartitionCounts(t, imageCount)
	if err != "" {
		// validateTopology refused such a topology when it was set; one read back from
		// another coordinator's records may still be one.
		return nil, nil, err
	}
	countOf = func(name string) (int32, bool) {
		if n, ok := imageCount(name); ok {
			return n, true
		}
		n, ok := decided[name]
		return n, ok
	}
	fixed := map[string]bool{}
	for _, s := range t.Subtopologies {
		for _, r := range s.RepartitionSourceTopics {
			if r.Partitions != 0 {
				fixed[r.Name] = true
			}
		}
	}
	for i := range t.Subtopologies {
		s := &t.Subtopologies[i]
		for _, g := range s.CopartitionGroups {
			var rep, ext []string
			for _, idx := range g.SourceTopics {
				if n := s.SourceTopics[idx]; repartition[n] {
					rep = append(rep, n)
				} else {
					ext = append(ext, n)
				}
			}
			for _, idx := range g.RepartitionSourceTopics {
				rep = append(rep, s.RepartitionSourceTopics[idx].Name)
			}
			want, detail := copartitionCount(rep, ext, fixed, countOf)
			if detail != "" {
				return nil, nil, detail
			}
			for _, n := range rep {
				decided[n] = want
			}
		}
	}
	return countOf, decided, ""
}

// copartitionCount is the partition count of a co-partition group's repartition topics
// rep: that of its external topics ext (which must agree), else that of its fixed
// repartition topics (which must agree), else the largest.
func copartitionCount(rep, ext []string, fixed map[string]bool, countOf func(string) (int32, bool)) (int32, string) {
	same := func(ts, named []string) (int32, string) {
		want := int32(-1)
		for _, n := range ts {
			c, _ := countOf(n)
			if want >= 0 && c != want {
				return 0, fmt.Sprintf("Following topics do not have the same number of partitions: [%s]", countsList(named, countOf))
			}
			want = c
		}
		return want, ""
	}
	var fixedRep []string
	for _, n := range rep {
		if fixed[n] {
			fixedRep = append(fixedRep, n)
		}
	}
	want, detail := int32(0), ""
	switch {
	case len(ext) > 0:
		want, detail = same(ext, ext)
	case len(fixedRep) > 0:
		want, detail = same(fixedRep, rep)
	default:
		for _, n := range rep {
			c, _ := countOf(n)
			want = max(want, c)
		}
	}
	if detail != "" {
		return 0, detail
	}
	for _, n := range fixedRep {
		if c, _ := countOf(n); c != want {
			return 0, fmt.Sprintf("Number of partitions [%d] of repartition topic [%s] doesn't match number of partitions [%d] of the source topic.", c, n, want)
		}
	}
	return want, ""
}

// configureSub is subtopology s configured with the decided counts: its task count
// (the largest of its sources, external and repartition) and its internal topics to
// have: repartition sources with their counts, changelogs with its task count (a source
// topic used as its table's changelog is neither counted nor created).
func configureSub(s *StreamsSubtopologyValue, repartition map[string]bool, countOf func(string) (int32, bool), decided map[string]int32) (*configuredSub, []StreamsTopicInfo) {
	cs := &configuredSub{repartitionSources: map[string]int32{}, changelogs: map[string]int32{}}
	cs.sources = externalSources(s, repartition)
	cs.repartitionSinks = slices.Clone(s.RepartitionSinkTopics)
	for _, n := range cs.sources {
		c, _ := countOf(n)
		cs.tasks = max(cs.tasks, c)
	}
	var create []StreamsTopicInfo
	for _, r := range s.RepartitionSourceTopics {
		c, _ := countOf(r.Name)
		cs.tasks = max(cs.tasks, c)
		want := r.Partitions
		if want == 0 {
			want = decided[r.Name]
		}
		cs.repartitionSources[r.Name] = want
		create = append(create, internalTopic(r, want, repartitionTopicDefaults))
	}
	for _, c := range s.StateChangelogTopics {
		if slices.Contains(s.SourceTopics, c.Name) {
			continue
		}
		cs.changelogs[c.Name] = cs.tasks
		create = append(create, internalTopic(c, cs.tasks, changelogTopicDefaults))
	}
	return cs, create
}

func countsList(ts []string, countOf func(string) (int32, bool)) string {
	ts = slices.Clone(ts)
	sort.Strings(ts)
	parts := make([]string, len(ts))
	for i, n := range ts {
		c, _ := countOf(n)
		parts[i] = fmt.Sprintf("%s=%d", n, c)
	}
	return strings.Join(parts, ", ")
}

// internalTopic is the creation of internal topic ti with n partitions: its replication
// factor (-1, the broker's default, when the topology leaves it 0) and its configs over
// Kafka Streams' defaults.
func internalTopic(ti StreamsTopicInfo, n int32, defaults []StreamsKeyValue) StreamsTopicInfo {
	out := StreamsTopicInfo{Name: ti.Name, Partitions: n, ReplicationFactor: ti.ReplicationFactor}
	if out.ReplicationFactor == 0 {
		out.ReplicationFactor = -1
	}
	set := map[string]bool{}
	for _, kv := range ti.Configs {
		set[kv.Key] = true
		out.Configs = append(out.Configs, kv)
	}
	for _, kv := range defaults {
		if !set[kv.Key] {
			out.Configs = append(out.Configs, kv)
		}
	}
	sort.Slice(out.Configs, func(i, j int) bool { return out.Configs[i].Key < out.Configs[j].Key })
	return out
}

// topologyMetadataHash hashes the topics of t that exist in im (name, id, partition
// count): a change of it (a topic created, deleted or grown) bumps the group epoch.
// Kafka hashes the same facts with its own function, so a Kafka coordinator that loads
// a group Samsa wrote computes another hash and bumps the epoch once.
func topologyMetadataHash(t *StreamsTopologyValue, im *topicImage) int64 {
	h := fnv.New64a()
	var buf []byte
	for _, n := range requiredTopics(t) {
		ti, ok := im.byName[n]
		if !ok {
			continue
		}
		buf = binary.BigEndian.AppendUint16(buf[:0], uint16(len(n)))
		buf = append(buf, n...)
		buf = append(buf, ti.ID[:]...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(ti.Partitions))
		h.Write(buf)
	}
	return int64(h.Sum64())
}

// describeTopology is the Topology of a StreamsGroupDescribe answer: the configured
// subtopologies (with the partition counts of their internal topics) when the topology
// is ready, else the topology as its members sent it.
func describeTopology(t *StreamsTopologyValue, ct *configuredTopology) *kmsg.StreamsGroupDescribeResponseGroupTopology {
	out := &kmsg.StreamsGroupDescribeResponseGroupTopology{Epoch: t.Epoch, Subtopologies: []kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology{}}
	info := func(ti StreamsTopicInfo, n int32) kmsg.TopicInfo {
		k := kmsg.NewTopicInfo()
		k.Topic, k.NumPartitions, k.ReplicationFactor = ti.Name, n, ti.ReplicationFactor
		k.Configs = []kmsg.TopicInfoConfig{}
		for _, kv := range ti.Configs {
			k.Configs = append(k.Configs, kmsg.TopicInfoConfig{Key: kv.Key, Value: kv.Value})
		}
		return k
	}
	for i := range t.Subtopologies {
		s := &t.Subtopologies[i]
		ds := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		ds.SubtopologyID = s.ID
		ds.SourceTopics = slices.Clone(s.SourceTopics)
		ds.RepartitionSinkTopics = slices.Clone(s.RepartitionSinkTopics)
		var cs *configuredSub
		if ct.ready() {
			cs = ct.subs[s.ID]
		}
		ds.StateChangelogTopics = []kmsg.TopicInfo{}
		for _, c := range s.StateChangelogTopics {
			n := c.Partitions
			if cs != nil {
				n = cs.changelogs[c.Name]
			}
			ds.StateChangelogTopics = append(ds.StateChangelogTopics, info(c, n))
		}
		ds.RepartitionSourceTopics = []kmsg.TopicInfo{}
		for _, r := range s.RepartitionSourceTopics {
			n := r.Partitions
			if cs != nil {
				n = cs.repartitionSources[r.Name]
			}
			ds.RepartitionSourceTopics = append(ds.RepartitionSourceTopics, info(r, n))
		}
		if cs != nil {
			sort.Strings(ds.SourceTopics)
			sort.Strings(ds.RepartitionSinkTopics)
		}
		out.Subtopologies = append(out.Subtopologies, ds)
	}
	return out
}
