package group

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/internal/latch"
)

// groupOperations is the authorized-operations bit set reported when a client asks
// (DescribeGroups v3+): READ, DELETE and DESCRIBE. Samsa has no authorizer yet.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups handles DescribeGroups (v0+). Member metadata and assignments are
// filled only for Stable groups, as Kafka does. A group that does not exist is
// reported in state Dead; from v6 on with GROUP_ID_NOT_FOUND.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	r := kmsg.NewPtrDescribeGroupsResponse()
	r.Version = req.Version
	for _, id := range req.Groups {
		out := kmsg.NewDescribeGroupsResponseGroup()
		out.Group = id
		out.State = stateDead.String()
		out.AuthorizedOperations = -2147483648
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = groupOperations
		}
		g, code := c.lookup(id, false)
		out.ErrorCode = code
		found := code == 0 && g != nil && g.describe(&out)
		if code == 0 && !found && req.Version >= 6 {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			if g != nil && g.kindLocked() != kindClassic {
				msg := "Group " + id + " is not a classic group."
				out.ErrorMessage = &msg
			}
		}
		r.Groups = append(r.Groups, out)
	}
	return r
}

// kindLocked returns the group's kind, taking its lock.
func (g *group) kindLocked() groupKind {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.kind
}

// describe fills out from the group; false when the group is Dead or not classic
// (consumer and share groups have their own describe APIs).
func (g *group) describe(out *kmsg.DescribeGroupsResponseGroup) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead || g.kind != kindClassic {
		return false
	}
	out.State = g.state.String()
	out.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		out.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		out.Members = append(out.Members, dm)
	}
	return true
}

// ListGroups handles ListGroups (v0+) with the state filter (v4+, case-insensitive)
// and the type filter (v5+: classic, consumer, share, streams). Consumer, share and
// streams groups report their own states (Empty, Assigning, Reconciling, Stable;
// Empty, Stable; Empty, NotReady, Assigning, Reconciling, Stable).
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	r := kmsg.NewPtrListGroupsResponse()
	r.Version = req.Version
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	for _, s := range c.mu.parts {
		if s == partLoading {
			r.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	c.mu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	for _, g := range gs {
		g.mu.Lock()
		st, pt, kind := g.state, g.protocolType, g.kind
		name := st.String()
		if m := g.modern(); m != nil && st != stateDead {
			name = m.stateName()
		}
		g.mu.Unlock()
		inStates := containsFold(req.StatesFilter, name)
		if kind == kindStreams {
			inStates = streamsStateIn(req.StatesFilter, name)
		}
		if st == stateDead || (len(req.StatesFilter) > 0 && !inStates) {
			continue
		}
		if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, kind.String()) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, pt, name, kind.String()
		r.Groups = append(r.Groups, lg)
	}
	return r
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// DeleteGroups handles DeleteGroups (v0+): each Empty group is deleted with its
// offsets (tombstones written); cb is called once every deletion is durable.
// Groups with members get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest, cb func(*kmsg.DeleteGroupsResponse)) {
	r := kmsg.NewPtrDeleteGroupsResponse()
	r.Version = req.Version
	r.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	// The answer leaves once every group's is in.
	l := latch.New(func() { cb(r) })
	done := func() { l.Done(nil) }
	for i, id := range req.Groups {
		out := &r.Groups[i]
		out.Group = id
		g, code := c.lookup(id, false)
		if code != 0 {
			out.ErrorCode = code
			continue
		}
		if g == nil {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			continue
		}
		l.Add()
		g.with(func(fx *effects) {
			mg := g.modern()
			nonEmpty := mg != nil && mg.size() > 0
			switch {
			case g.state == stateDead:
				out.ErrorCode = kerr.GroupIDNotFound.Code
				done()
				return
			case (g.state != stateEmpty && g.kind != kindStreams) || nonEmpty:
				out.ErrorCode = kerr.NonEmptyGroup.Code
				done()
				return
			}
			recs := make([]Record, 0, len(g.offsets)+1)
			for tp := range g.offsets {
				recs = append(recs, g.offsetTombstone(tp))
			}
			if mg != nil {
				recs = append(recs, mg.tombstonesLocked(g)...)
			} else {
				recs = append(recs, g.groupTombstone())
			}
			if hook := g.c.cfg.ShareGroupDeleted; hook != nil && g.kind == kindShare {
				id := g.id
				fx.add(func() { hook(id) })
			}
			g.offsets = map[topicPartition]OffsetValue{}
			g.transition(stateDead)
			g.stopTimersLocked()
			g.c.dropGroupLocked(g)
			g.appendLocked(fx, recs, func(err error) {
				out.ErrorCode = appendErrorCode(err, false)
				done()
			})
		})
	}
	done()
}
