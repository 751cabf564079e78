package group

import "sort"

// Offsets of deleted topics. When a topic leaves the cluster (its id is gone from the
// topics SetTopics hands the coordinator), every loaded group's committed offsets of
// that topic are deleted, tombstones written, as Kafka's group coordinator does when
// its metadata publisher reports deleted partitions (onPartitionsDeleted): a topic
// re-created under the same name then starts with no committed offsets, instead of
// the old topic's (a consumer resumed at offsets of data that no longer exists). An
// OffsetFetch of the new topic answers -1 until its group commits again.
//
// Transactional offsets pending on a deleted topic are dropped with the group's next
// marker, as any other (txn_offsets.go): their partitions are gone from g.offsets.

// deletedTopics returns the names of the topics of old whose id is not in new.
func deletedTopics(old, new *topicImage) []string {
	var out []string
	for id, t := range old.byID {
		if _, ok := new.byID[id]; !ok {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

// dropTopicOffsets deletes every loaded group's offsets of topics (tombstones written
// from the groups' own goroutines: effects run once each group's lock is released).
func (c *Coordinator) dropTopicOffsets(topics []string) {
	if len(topics) == 0 {
		return
	}
	gone := make(map[string]bool, len(topics))
	for _, t := range topics {
		gone[t] = true
	}
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.with(func(fx *effects) {
			if g.state == stateDead || g.kind == kindShare {
				return
			}
			var tps []topicPartition
			for tp := range g.offsets {
				if gone[tp.topic] {
					tps = append(tps, tp)
				}
			}
			for tp, n := range g.pendingCommits {
				if gone[tp.topic] && n > 0 {
					if _, ok := g.offsets[tp]; !ok {
						tps = append(tps, tp)
					}
				}
			}
			if len(tps) == 0 {
				return
			}
			sort.Slice(tps, func(i, j int) bool {
				if tps[i].topic != tps[j].topic {
					return tps[i].topic < tps[j].topic
				}
				return tps[i].partition < tps[j].partition
			})
			recs := make([]Record, 0, len(tps))
			for _, tp := range tps {
				delete(g.offsets, tp)
				if g.pendingCommits[tp] > 0 {
					g.deleted[tp]++
				}
				recs = append(recs, g.offsetTombstone(tp))
			}
			g.c.logger.Info("offsets of deleted topics removed", "group", g.id, "partitions", len(recs))
			g.appendLocked(fx, recs, func(err error) {
				if err != nil {
					g.c.logger.Warn("tombstones of a deleted topic's offsets not written", "group", g.id, "err", err)
				}
			})
		})
	}
}
