package controller

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// UsableBrokers returns the brokers that may receive new replicas and lead
// partitions: registered, unfenced and not in controlled shutdown, sorted by id.
func UsableBrokers(im *metadata.Image) []metadata.BrokerImage {
	var out []metadata.BrokerImage
	for _, b := range im.Brokers() {
		if !b.Fenced && !b.InControlledShutdown {
			out = append(out, b)
		}
	}
	return out
}

// acceptableLeader reports whether broker id may lead or join an ISR: registered,
// unfenced and not in controlled shutdown.
func acceptableLeader(im *metadata.Image, id int32) bool {
	b, ok := im.Broker(id)
	return ok && !b.Fenced && !b.InControlledShutdown
}

// PlaceReplicas places partitions first..first+count-1 with rf replicas each on
// brokers, Kafka's way:
//
//   - without racks: brokers sorted by id; partition i's j-th replica on broker
//     (i + j + start) mod n;
//   - with racks (some broker has one; a broker without a rack counts as its own
//     rack ""): the brokers are ordered rack-alternating (racks sorted, then one broker
//     of each rack in turn, each rack's brokers by id), partition i's first replica is
//     broker (i + start) mod n of that order, and each next replica is the next broker
//     of the order whose rack the partition does not use yet, then, once every rack
//     is used, the next broker it does not use yet.
//
// The first replica is the preferred leader. An rf above the number of brokers is
// INVALID_REPLICATION_FACTOR; a count below one INVALID_PARTITIONS.
func PlaceReplicas(brokers []metadata.BrokerImage, first, count int32, rf int16, start int) ([][]int32, error) {
	if count < 1 || first < 0 || int64(first)+int64(count) > metadata.MaxPartitions {
		return nil, errf(kerr.InvalidPartitions, "number of partitions must be larger than 0")
	}
	if rf < 1 {
		return nil, errf(kerr.InvalidReplicationFactor, "replication factor must be larger than 0")
	}
	if int(rf) > len(brokers) {
		return nil, errf(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: %d", rf, len(brokers))
	}
	order, racks := rackAlternated(brokers)
	n, nRacks := len(order), countRacks(racks)
	start = ((start % n) + n) % n
	out := make([][]int32, count)
	for k := range out {
		i := int(first) + k
		reps := make([]int32, 0, rf)
		used := map[string]bool{}
		pos := (i + start) % n
		reps = append(reps, order[pos].ID)
		used[racks[pos]] = true
		for len(reps) < int(rf) {
			// The next broker in order that is unused, on an unused rack while one is
			// left (there always is such a broker: rf <= n).
			allRacks := len(used) == nRacks
			for step := 1; step < n; step++ {
				c := (pos + step) % n
				if slices.Contains(reps, order[c].ID) || (!allRacks && used[racks[c]]) {
					continue
				}
				reps = append(reps, order[c].ID)
				used[racks[c]] = true
				break
			}
		}
		out[k] = reps
	}
	return out, nil
}

// rackAlternated orders brokers for placement: by id when no broker has a rack, else
// rack-alternating. It returns the order and each position's rack.
func rackAlternated(brokers []metadata.BrokerImage) ([]metadata.BrokerImage, []string) {
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b metadata.BrokerImage) int { return int(a.ID) - int(b.ID) })
	sorted = slices.CompactFunc(sorted, func(a, b metadata.BrokerImage) bool { return a.ID == b.ID })
	rackOf := func(b metadata.BrokerImage) string {
		if b.Rack == nil {
			return ""
		}
		return *b.Rack
	}
	anyRack := false
	for _, b := range sorted {
		anyRack = anyRack || b.Rack != nil
	}
	racks := make([]string, 0, len(sorted))
	if !anyRack {
		for range sorted {
			racks = append(racks, "")
		}
		return sorted, racks
	}
	byRack := map[string][]metadata.BrokerImage{}
	var names []string
	for _, b := range sorted {
		r := rackOf(b)
		if _, ok := byRack[r]; !ok {
			names = append(names, r)
		}
		byRack[r] = append(byRack[r], b)
	}
	slices.SortFunc(names, strings.Compare)
	order := make([]metadata.BrokerImage, 0, len(sorted))
	for round := 0; len(order) < len(sorted); round++ {
		for _, r := range names {
			if round < len(byRack[r]) {
				order = append(order, byRack[r][round])
				racks = append(racks, r)
			}
		}
	}
	return order, racks
}

func countRacks(racks []string) int {
	seen := map[string]bool{}
	for _, r := range racks {
		seen[r] = true
	}
	return len(seen)
}

// ValidateAssignment checks a manual replica assignment (CreateTopics'
// replica_assignment, CreatePartitions' assignments, a reassignment's target) against
// im: every partition has replicas, none listed twice, every broker registered, and
// (wantRF > 0) exactly wantRF replicas each, else the first partition's count. first
// numbers the partitions in messages.
func ValidateAssignment(im *metadata.Image, assignment [][]int32, first int32, wantRF int) error {
	for k, reps := range assignment {
		p := int(first) + k
		if len(reps) == 0 {
			return errf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", p)
		}
		if hasDuplicates(reps) {
			return errf(kerr.InvalidReplicaAssignment, "partition %d: a broker is listed twice in %v", p, reps)
		}
		for _, id := range reps {
			if _, ok := im.Broker(id); !ok {
				return errf(kerr.InvalidReplicaAssignment, "partition %d: unknown broker %d", p, id)
			}
		}
		if wantRF <= 0 {
			wantRF = len(reps)
		}
		if len(reps) != wantRF {
			return errf(kerr.InvalidReplicaAssignment, "partition %d has %d replicas, inconsistent with the other partitions' %d", p, len(reps), wantRF)
		}
	}
	return nil
}

// NewPartitionRecords returns the records that create partitions first, first+1, ...
// of topic id with the given assignment: the ISR is the replicas that may lead (all
// of them for a placement over UsableBrokers), the first of them leads, epochs 0. A
// partition none of whose replicas may lead is INVALID_REPLICA_ASSIGNMENT.
func NewPartitionRecords(im *metadata.Image, id metadata.UUID, first int32, assignment [][]int32) ([]metadata.Record, error) {
	out := make([]metadata.Record, 0, len(assignment))
	for k, reps := range assignment {
		isr := make([]int32, 0, len(reps))
		for _, r := range reps {
			if acceptableLeader(im, r) {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, errf(kerr.InvalidReplicaAssignment, "partition %d: every broker of %v is fenced or in controlled shutdown", int(first)+k, reps)
		}
		out = append(out, &metadata.PartitionRecord{TopicID: id, Partition: first + int32(k),
			Replicas: slices.Clone(reps), ISR: isr, Leader: isr[0]})
	}
	return out, nil
}
