package node

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/controller/quorum"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// A dynamic quorum (KIP-853, kraft.version 1). A controller configured with
// controller.quorum.bootstrap.servers instead of controller.quorum.voters is
// formatted, as with kafka-storage.sh, with one of:
//
//	--standalone                 this controller is the quorum's only voter
//	--initial-controllers L      the voters are L: id@host:port:directory-id,...
//	                             (this controller among them, its metadata.log.dir
//	                             taking the directory id L gives it)
//	--no-initial-controllers     no voter: the controller waits to be added
//	                             (samsa metadata-quorum add-controller)
//
// The format writes kraft.version 1 and, with the first two, the VotersRecord of
// the initial voters into the bootstrap records (bootstrap.go): node id, directory
// id, raft id (quorum.DynamicRaftID) and the controller listener's endpoint. At
// start such a controller runs with no static voters (Config.Dynamic): the quorum
// takes its members from the log, the net/peer client their addresses
// (Client.SetVoters), and a controller not yet added learns them from the
// bootstrap servers. A controller whose bootstrap servers name it alone and that
// was formatted without these flags is a static quorum of one, as before.

// QuorumFormat is how `samsa storage format` makes a controller's quorum: static
// (the zero value: controller.quorum.voters, or bootstrap servers naming this
// controller alone) or one of the dynamic modes.
type QuorumFormat struct {
	Standalone           bool
	InitialControllers   []InitialController
	NoInitialControllers bool
}

// Dynamic reports whether f makes a dynamic quorum.
func (f QuorumFormat) Dynamic() bool {
	return f.Standalone || len(f.InitialControllers) > 0 || f.NoInitialControllers
}

// InitialController is one entry of --initial-controllers.
type InitialController struct {
	ID          int32
	Host        string
	Port        int
	DirectoryID metadata.UUID
}

// ParseInitialControllers parses --initial-controllers, Kafka's syntax:
// id@host:port:directory-id,... (an IPv6 host in brackets; directory ids as
// `samsa storage random-uuid` prints them). Ids and directory ids must be unique.
func ParseInitialControllers(s string) ([]InitialController, error) {
	var out []InitialController
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		bad := func(why string) error {
			return errorf("--initial-controllers entry %q: %s (want id@host:port:directory-id)", e, why)
		}
		ids, rest, ok := strings.Cut(e, "@")
		i := strings.LastIndex(rest, ":")
		if !ok || i < 0 {
			return nil, bad("malformed")
		}
		id, err := strconv.ParseInt(ids, 10, 32)
		if err != nil || id < 0 {
			return nil, bad("bad node id")
		}
		dir, err := metadata.ParseUUID(rest[i+1:])
		if err != nil || dir == metadata.ZeroUUID {
			return nil, bad("bad directory id")
		}
		host, port, err := net.SplitHostPort(rest[:i])
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || host == "" || p <= 0 || p > 65535 {
			return nil, bad("bad host:port")
		}
		for _, o := range out {
			if o.ID == int32(id) || o.DirectoryID == dir {
				return nil, bad("node id or directory id given twice")
			}
		}
		out = append(out, InitialController{ID: int32(id), Host: host, Port: p, DirectoryID: dir})
	}
	if len(out) == 0 {
		return nil, errorf("--initial-controllers is empty")
	}
	return out, nil
}

// checkQuorumFormat checks f against cfg as kafka-storage.sh does.
func checkQuorumFormat(cfg *Config, f QuorumFormat) error {
	n := 0
	for _, set := range []bool{f.Standalone, len(f.InitialControllers) > 0, f.NoInitialControllers} {
		if set {
			n++
		}
	}
	switch {
	case !cfg.Roles.Controller:
		return nil // a broker takes its metadata from the controllers
	case n > 1:
		return errorf("only one of --standalone, --initial-controllers and --no-initial-controllers may be given")
	case n == 1 && !cfg.QuorumBootstrap:
		return errorf("--standalone, --initial-controllers and --no-initial-controllers make a dynamic quorum, whose controllers set controller.quorum.bootstrap.servers instead of controller.quorum.voters")
	case n == 0 && cfg.QuorumBootstrap && !cfg.SoleVoter():
		return errorf("Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers.")
	case len(f.InitialControllers) > 0 && !slices.ContainsFunc(f.InitialControllers, func(c InitialController) bool { return c.ID == cfg.NodeID }):
		return errorf("--initial-controllers does not name this controller, node.id %d", cfg.NodeID)
	}
	return nil
}

// formatVoters returns the VotersRecord of f's initial voters (nil for
// --no-initial-controllers and a static quorum), this controller's metadata
// directory having id dir.
func formatVoters(cfg *Config, f QuorumFormat, dir metadata.UUID) (*metadata.VotersRecord, error) {
	kraft := metadata.SupportedFeatures()[metadata.FeatureKRaftVersion]
	name := cfg.ControllerListenerNames[0]
	voter := func(id int32, dir metadata.UUID, host string, port int) metadata.QuorumVoter {
		return metadata.QuorumVoter{ID: id, DirectoryID: dir, RaftID: quorum.DynamicRaftID(id, dir), KRaftVersion: kraft,
			Endpoints: []metadata.VoterEndpoint{{Name: name, Host: host, Port: uint16(port)}}}
	}
	switch {
	case f.Standalone:
		host, port, err := ControllerEndpoint(cfg)
		if err != nil {
			return nil, err
		}
		return &metadata.VotersRecord{Voters: []metadata.QuorumVoter{voter(cfg.NodeID, dir, host, port)}}, nil
	case len(f.InitialControllers) > 0:
		r := &metadata.VotersRecord{}
		for _, c := range f.InitialControllers {
			r.Voters = append(r.Voters, voter(c.ID, c.DirectoryID, c.Host, c.Port))
		}
		return r, nil
	}
	return nil, nil
}

// ControllerEndpoint is the address other controllers reach this one at, as a
// VotersRecord records it (--standalone, samsa metadata-quorum add-controller,
// UpdateRaftVoter): its entry of controller.quorum.voters, else the bootstrap server
// that is its controller listener, else the listener's host.
func ControllerEndpoint(cfg *Config) (string, int, error) {
	ctl, ok := cfg.ControllerListener()
	if !ok || ctl.Port == 0 {
		return "", 0, errorf("the controller listener needs a fixed port")
	}
	for _, v := range cfg.Voters {
		if v.ID == cfg.NodeID && v.Port != 0 {
			return v.Host, v.Port, nil
		}
	}
	if bs, err := parseBootstrapServers(cfg.Keys["controller.quorum.bootstrap.servers"]); err == nil {
		for _, b := range bs {
			if b.Port == ctl.Port && sameAddress(ctl, b.Host, b.Port) {
				return b.Host, b.Port, nil
			}
		}
	}
	if ip := net.ParseIP(ctl.Host); ctl.Host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", 0, errorf("the controller listener %s binds every interface and no controller.quorum.bootstrap.servers entry names it: name this controller there", ctl)
	}
	return ctl.Host, ctl.Port, nil
}

// DynamicQuorum reports whether cfg's controller runs a dynamic quorum: it was
// given controller.quorum.bootstrap.servers and formatted with --standalone,
// --initial-controllers or --no-initial-controllers (its bootstrap records finalize
// kraft.version 1). A controller given bootstrap servers that do not name it alone
// and formatted otherwise cannot start.
func DynamicQuorum(cfg *Config) (bool, error) {
	if !cfg.Roles.Controller || !cfg.QuorumBootstrap {
		return false, nil
	}
	recs, err := ReadBootstrap(cfg.MetadataDir)
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		switch r := r.(type) {
		case *metadata.VotersRecord:
			return true, nil
		case *metadata.FeatureLevelRecord:
			if r.Name == metadata.FeatureKRaftVersion && r.Level >= 1 {
				return true, nil
			}
		}
	}
	if cfg.SoleVoter() {
		return false, nil
	}
	return false, errorf("controller.quorum.voters is not set and %s was not formatted for a dynamic quorum: format it with --standalone, --initial-controllers or --no-initial-controllers, or set controller.quorum.voters",
		filepath.Join(cfg.MetadataDir, BootstrapRecordsFile))
}

// memberAddrs returns the controller listener (name) address of each member that
// records one, by node id.
func memberAddrs(ms []quorum.Member, name string) map[int32]string {
	out := map[int32]string{}
	for _, m := range ms {
		for _, e := range m.Endpoints {
			if e.Name == name {
				out[m.ID] = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
			}
		}
	}
	return out
}

// imageVoterAddrs is memberAddrs of the voters an image records (a broker's view).
func imageVoterAddrs(im *metadata.Image, name string) map[int32]string {
	vs, ok := im.QuorumVoters()
	if !ok {
		return nil
	}
	out := map[int32]string{}
	for _, v := range vs {
		if e, ok := v.Endpoint(name); ok {
			out[v.ID] = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
		}
	}
	return out
}

// voterChannel sends a request to the quorum's leader (net/peer's ControllerChannel).
type voterChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// reportVoter keeps this controller's entry in a dynamic quorum's VotersRecord
// right, as Kafka's voters do with UpdateRaftVoter (82): a voter recorded without
// its directory id (a quorum upgraded from kraft.version 0) or with other endpoints
// than its controller listener's sends the leader its own. It looks whenever the
// members or the leadership change, and every retry interval while an update is
// due; it returns when ctx ends. A static quorum's log records no voters: nothing
// to report.
func (r *controllerRole) reportVoter(ctx context.Context, cfg *Config, dir metadata.UUID, ch voterChannel, retry time.Duration) {
	host, port, err := ControllerEndpoint(cfg)
	if err != nil || dir == metadata.ZeroUUID {
		return
	}
	want := metadata.VoterEndpoint{Name: cfg.ControllerListenerNames[0], Host: host, Port: uint16(port)}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	r.q.SubscribeMembers(func([]quorum.Member) { poke() })
	r.q.SubscribeLeadership(func(quorum.Leadership) { poke() })
	t := time.NewTicker(retry)
	defer t.Stop()
	for {
		if due(r.q, cfg.NodeID, dir, want) {
			if err := sendUpdateVoter(ctx, ch, cfg.NodeID, dir, want); err != nil {
				r.log.Info("reporting this controller's directory id and endpoint to the quorum's leader (UpdateRaftVoter): will retry", "err", err)
			} else {
				r.log.Info("reported this controller's directory id and endpoint to the quorum's leader (UpdateRaftVoter)", "directory_id", dir.String(), "endpoint", want.String())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// due reports whether the log records node's entry (by directory id, or without
// one under the static raft id) with another directory id or without endpoint want.
func due(q *quorum.Quorum, node int32, dir metadata.UUID, want metadata.VoterEndpoint) bool {
	_, im := q.Committed()
	vs, dynamic := im.QuorumVoters()
	if !dynamic {
		return false
	}
	for _, v := range vs {
		switch {
		case v.ID != node:
		case v.DirectoryID == dir:
			return !slices.Contains(v.Endpoints, want)
		case v.DirectoryID == metadata.ZeroUUID && v.RaftID == quorum.RaftID(node):
			return true
		}
	}
	return false
}

func sendUpdateVoter(ctx context.Context, ch voterChannel, node int32, dir metadata.UUID, e metadata.VoterEndpoint) error {
	req := kmsg.NewPtrUpdateRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID, req.CurrentLeaderEpoch = node, dir, -1
	l := kmsg.NewUpdateRaftVoterRequestListener()
	l.Name, l.Host, l.Port = e.Name, e.Host, e.Port
	req.Listeners = append(req.Listeners, l)
	kv := metadata.SupportedFeatures()[metadata.FeatureKRaftVersion]
	req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = kv.Min, kv.Max
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := ch.Request(rctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode)
}

// memberSource is a combined node's metadata source: its own voter's committed log
// while the voter is a member of the quorum, else the voters' (net/peer). A voter
// removed from a dynamic quorum stops receiving the log once the configuration
// without it is left; its broker goes on with the others' log from the offset it
// reached (raft indexes: the same offsets). It is no member when its image records
// a voter set without it (from the entry that starts its removal on), or records
// nothing yet (a controller waiting to be added).
type memberSource struct {
	local, remote controller.MetadataSource
	q             *quorum.Quorum
}

func (s memberSource) source() controller.MetadataSource {
	off, im := s.q.Committed()
	vs, dynamic := im.QuorumVoters()
	switch {
	case off == 0:
		return s.remote
	case !dynamic:
		return s.local
	case slices.ContainsFunc(vs, func(v metadata.QuorumVoter) bool { return v.RaftID == s.q.RaftID() }):
		return s.local
	}
	return s.remote
}

// Fetch implements controller.MetadataSource.
func (s memberSource) Fetch(ctx context.Context, offset uint64, maxBytes int, wait time.Duration) (controller.MetadataBatch, error) {
	return s.source().Fetch(ctx, offset, maxBytes, wait)
}

// Snapshot implements controller.MetadataSource.
func (s memberSource) Snapshot(ctx context.Context) (uint64, []byte, error) {
	return s.source().Snapshot(ctx)
}
