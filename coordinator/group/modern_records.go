package group

// Records of modern groups: what the skeleton writes for every protocol (target,
// current assignment, epoch, tombstones in Kafka's order), and the replay that gathers
// a group's records when its partition loads and makes its members again. Each
// protocol's own records and replay are in consumer_records.go, share.go and
// streams_records.go; their layouts in schema_consumer.go and schema_streams.go.

func (g *group) rec(t int16, second string, value []byte) Record {
	return Record{Timestamp: g.c.clock.Now().UnixMilli(), Key: appendGroupTypedKey(nil, t, g.id, second), Value: value}
}

// installTargetLocked makes out(id) the target of each member of ids, writing a
// TargetAssignment record for each one that changed, and then the target's epoch: the
// group epoch (a TargetAssignmentMetadata record).
func (mg *modernGroup[A, M]) installTargetLocked(g *group, ids []string, out func(id string) A, recs *[]Record) {
	for _, id := range ids {
		a := out(id)
		if old, ok := mg.target[id]; ok && old.equal(a) {
			continue
		}
		mg.target[id] = a
		*recs = append(*recs, mg.targetRecord(g, id, a))
	}
	mg.assignmentEpoch = mg.epoch
	*recs = append(*recs, mg.targetMetadataRecord(g))
}

// epochRecord is the group's metadata record when it holds the group epoch alone
// (consumer and share groups).
func (mg *modernGroup[A, M]) epochRecord(g *group) Record {
	return g.rec(mg.types.metadata, "", appendEpochValue(nil, mg.epoch))
}

func (mg *modernGroup[A, M]) targetMetadataRecord(g *group) Record {
	return g.rec(mg.types.targetMetadata, "", appendEpochValue(nil, mg.assignmentEpoch))
}

func (mg *modernGroup[A, M]) targetRecord(g *group, id string, a A) Record {
	return g.rec(mg.types.targetMember, id, mg.rules.targetValue(a))
}

func (mg *modernGroup[A, M]) currentRecord(g *group, m M) Record {
	return g.rec(mg.types.current, m.base().id, mg.rules.currentValue(m))
}

// memberTombstones deletes a member's three records, in Kafka's order.
func (mg *modernGroup[A, M]) memberTombstones(g *group, id string) []Record {
	return []Record{
		g.rec(mg.types.current, id, nil),
		g.rec(mg.types.targetMember, id, nil),
		g.rec(mg.types.member, id, nil),
	}
}

// membersTombstones deletes the records of every member and of the target, in the
// order of Kafka's createGroupTombstoneRecords (consumer and streams groups): current
// assignments, target assignments, the target's metadata, members' metadata.
func (mg *modernGroup[A, M]) membersTombstones(g *group) []Record {
	ids := mg.sortedIDs()
	recs := make([]Record, 0, 3*len(ids)+1)
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.current, id, nil))
	}
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.targetMember, id, nil))
	}
	recs = append(recs, g.rec(mg.types.targetMetadata, "", nil))
	for _, id := range ids {
		recs = append(recs, g.rec(mg.types.member, id, nil))
	}
	return recs
}

// loadedModern gathers a modern group's records during a replay: where its last
// metadata record was and whether it lives, and the values of its members', targets'
// and current assignments' records as they decode (MV, TV, CV).
type loadedModern[MV, TV, CV any] struct {
	seq         int  // replay position of the group's last metadata record
	live        bool // that record holds a value (not a tombstone) that decodes
	members     map[string]MV
	targetEpoch int32
	targets     map[string]TV
	current     map[string]CV
}

func newLoadedModern[MV, TV, CV any]() loadedModern[MV, TV, CV] {
	return loadedModern[MV, TV, CV]{members: map[string]MV{}, targets: map[string]TV{}, current: map[string]CV{}}
}

// decodeValue decodes a record's value; a tombstone is V's zero value.
func decodeValue[V any](value []byte, decode func([]byte) (V, error)) (V, error) {
	if value == nil {
		var zero V
		return zero, nil
	}
	return decode(value)
}

// applyKeyed folds a record keyed by a member id (or a regex) into m: a tombstone
// deletes the key, a value that decodes replaces it.
func applyKeyed[V any](m map[string]V, key string, value []byte, decode func([]byte) (V, error)) error {
	if value == nil {
		delete(m, key)
		return nil
	}
	v, err := decode(value)
	if err == nil {
		m[key] = v
	}
	return err
}

// restoreMembers makes mg's members from l's records: member makes one from its
// metadata, current sets its epochs and holdings from its current assignment when it
// has one (without, it starts at epoch 0 holding nothing); and the targets of those
// members.
func restoreMembers[A holding[A], M memberOf[A], MV, TV, CV any](mg *modernGroup[A, M], l *loadedModern[MV, TV, CV],
	member func(id string, v MV) M, current func(m M, v CV), target func(TV) A) {
	for id, v := range l.members {
		m := member(id, v)
		if cur, ok := l.current[id]; ok {
			current(m, cur)
		}
		mg.members[id] = m
		if inst := m.base().instanceID; inst != nil {
			mg.static[*inst] = id
		}
	}
	for id, tv := range l.targets {
		if _, ok := mg.members[id]; ok {
			mg.target[id] = target(tv)
		}
	}
}

// restoredState is a member state as a record holds it; a value Kafka may add later is
// msUnknown (the member is fenced unless it owns nothing).
func restoredState(s int8) memberState {
	switch memberState(s) {
	case msStable, msUnrevoked, msUnreleased:
		return memberState(s)
	}
	return msUnknown
}
