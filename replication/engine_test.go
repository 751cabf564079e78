package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
)

// The same cores over real engine logs, driven by their own goroutines (fetchers, the
// ISR loop, the purgatory's reaper), wired in one process: a FetchClient answering from
// the leader's Manager and log, an ISRClient in front of a one-partition controller.

type inproc struct {
	t       *testing.T
	mu      sync.Mutex
	nodes   map[int32]*Manager
	engines map[int32]*engine.Manager
	woken   chan struct{} // closed and replaced when a leader appends
	st      PartitionState
	down    map[int32]bool // fetches to or from these fail
}

func newInproc(t *testing.T) *inproc {
	return &inproc{t: t, nodes: map[int32]*Manager{}, engines: map[int32]*engine.Manager{}, woken: make(chan struct{}), down: map[int32]bool{}}
}

func (ip *inproc) wake() {
	ip.mu.Lock()
	close(ip.woken)
	ip.woken = make(chan struct{})
	ip.mu.Unlock()
}

func (ip *inproc) start(id int32) *Manager {
	t := ip.t
	eng, err := engine.Open(engine.Options{Dirs: []string{filepath.Join(t.TempDir(), "logs")}, Sync: engine.SyncFsync})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(Config{
		NodeID:      id,
		BrokerEpoch: func() int64 { return int64(id) * 10 },
		Logs:        EngineLogs(eng),
		ISR:         ip,
		Fetch:       func(source int32, _ int) FetchClient { return &inprocFetch{ip: ip, self: id, source: source} },
		// Not shorter: under fsync on a loaded machine a follower's fetch, append and
		// fdatasync have taken over 300 ms, and the ISR shrank under acks=all.
		ReplicaLagTimeMax:     time.Second,
		NumReplicaFetchers:    2,
		Fetcher:               FetcherConfig{MaxWait: 50 * time.Millisecond, Backoff: 20 * time.Millisecond, MaxBytes: 4096},
		AlterPartitionBackoff: 20 * time.Millisecond,
		Hooks:                 Hooks{LeaderAppended: func(*Partition) { ip.wake() }},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		eng.Close()
	})
	ip.mu.Lock()
	ip.nodes[id], ip.engines[id] = m, eng
	ip.mu.Unlock()
	return m
}

// publish applies the partition state to every node, as the metadata would.
func (ip *inproc) publish() {
	ip.mu.Lock()
	st := ip.st
	ms := make(map[int32]*Manager, len(ip.nodes))
	for id, m := range ip.nodes {
		ms[id] = m
	}
	ip.mu.Unlock()
	for id, m := range ms {
		s := st
		s.ISR, s.Replicas = slices.Clone(st.ISR), slices.Clone(st.Replicas)
		d := Delta{Followers: []PartitionState{s}}
		if st.Leader == id {
			d = Delta{Leaders: []PartitionState{s}}
		}
		if err := m.Apply(d); err != nil {
			ip.t.Error(err)
		}
	}
}

// AlterPartition implements ISRClient: the controller of the one partition.
func (ip *inproc) AlterPartition(_ context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	resp := kmsg.NewPtrAlterPartitionResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			ip.mu.Lock()
			switch {
			case p.LeaderEpoch != ip.st.LeaderEpoch:
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case p.PartitionEpoch != ip.st.PartitionEpoch:
				rp.ErrorCode = kerr.InvalidUpdateVersion.Code
			default:
				ip.st.ISR = slices.Clone(p.NewISR)
				ip.st.PartitionEpoch++
				rp.ISR, rp.PartitionEpoch = ip.st.ISR, ip.st.PartitionEpoch
			}
			ip.mu.Unlock()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	ip.publish()
	return resp, nil
}

type inprocFetch struct {
	ip           *inproc
	self, source int32
}

var errDown = errors.New("inproc: node down")

// Fetch implements FetchClient: sessionless, long-polling until the leader appends.
func (c *inprocFetch) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	deadline := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer deadline.Stop()
	for {
		c.ip.mu.Lock()
		m, eng, woken, down := c.ip.nodes[c.source], c.ip.engines[c.source], c.ip.woken, c.ip.down[c.self] || c.ip.down[c.source]
		c.ip.mu.Unlock()
		if down {
			return nil, errDown
		}
		resp, bytes := serveFetch(m, eng, c.self, req)
		if bytes > 0 {
			return resp, nil
		}
		select {
		case <-woken:
		case <-deadline.C:
			resp, _ := serveFetch(m, eng, c.self, req)
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func serveFetch(m *Manager, eng *engine.Manager, replica int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, int) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	total := 0
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			tp := engine.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			part := m.Partition(tp)
			if part == nil {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			} else if res, err := part.FollowerFetch(replica, req.ReplicaState.Epoch, p.FetchOffset, p.LastFetchedEpoch, p.CurrentLeaderEpoch, req.Version); err != nil {
				rp.ErrorCode = simCode(err)
				rp.LogStartOffset, rp.HighWatermark = res.LogStartOffset, res.HighWatermark
			} else if res.Diverging {
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
				rp.HighWatermark = res.HighWatermark
			} else {
				rp.HighWatermark, rp.LogStartOffset = res.HighWatermark, res.LogStartOffset
				b, err := eng.Log(tp).ReadCopy(p.FetchOffset, p.PartitionMaxBytes, res.LogEndOffset, true, nil)
				if err != nil {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
				rp.RecordBatches = b
				total += len(b)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total
}

func (c *inprocFetch) OffsetForLeaderEpoch(context.Context, *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	return nil, errors.New("inproc: not served (the fetchers use Fetch's diverging epoch)")
}

func (c *inprocFetch) ListOffsets(context.Context, *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	return nil, errors.New("inproc: not served (no partition is tiered)")
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var errNoAnswer = errors.New("no answer within 10s")

// produceWait produces v with acks=-1 and waits for the answer.
func produceWait(m *Manager, v string) error {
	p := m.Partition(tp0())
	if p == nil {
		return ErrUnknownPartition
	}
	done := make(chan error, 1)
	pr := &Produce{}
	pr.Begin(m, -1, 5*time.Second, func() {
		if pr.Len() == 0 {
			return
		}
		done <- pr.Part(0).Err
	})
	_, err := pr.Append(p, makeBatch(v))
	pr.Seal()
	if err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return errNoAnswer
	}
}

func TestEngineLogsReplicate(t *testing.T) {
	ip := newInproc(t)
	leader, follower := ip.start(1), ip.start(2)
	ip.st = PartitionState{Topic: "t", TopicID: [16]byte{1}, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2},
		Leader: 1, LeaderEpoch: 0, MinISR: 2}
	ip.publish()

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := produceWait(leader, fmt.Sprintf("w%d-%d", w, i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("acks=all: %v", err)
	}
	ll, fl := ip.engines[1].Log(tp0()), ip.engines[2].Log(tp0())
	if hw := ll.HighWatermark(); hw != 40 {
		t.Fatalf("leader HW %d", hw)
	}
	// Under fsync the leader counts the follower's fetch offset, which it sends only
	// once what it appended is durable: the HW never passes the follower's durable end.
	if rp := fl.RecoveryPoint(); rp < ll.HighWatermark() {
		t.Fatalf("HW %d above the follower's recovery point %d", ll.HighWatermark(), rp)
	}
	eventually(t, "the follower learns the HW", func() bool { return fl.HighWatermark() == 40 })
	lb, _ := ll.ReadCopy(0, 1<<20, 40, true, nil)
	fb, _ := fl.ReadCopy(0, 1<<20, 40, true, nil)
	if !bytes.Equal(lb, fb) {
		t.Fatal("the follower's log differs from the leader's")
	}
	if st := leader.Stats(); st.Leaders != 1 || st.UnderReplicated != 0 || len(st.Lags) != 1 || st.Lags[0].Lag != 0 {
		t.Fatalf("leader stats %+v", st)
	}
	if st := follower.Stats(); st.Followers != 1 || st.Fetchers != 1 {
		t.Fatalf("follower stats %+v", st)
	}

	// The follower stops fetching: it leaves the ISR after replica.lag.time.max.ms,
	// through AlterPartition, and acks=all with min.insync.replicas=2 is refused.
	ip.mu.Lock()
	ip.down[2] = true
	ip.mu.Unlock()
	go produceWait(leader, "lag") // something to fall behind on; answered by the shrink
	eventually(t, "the ISR shrinks", func() bool { st := leader.Partition(tp0()).State(); return len(st.ISR) == 1 })
	if err := produceWait(leader, "x"); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all below min.insync.replicas: %v", err)
	}
	// Back: it catches up and rejoins.
	ip.mu.Lock()
	ip.down[2] = false
	ip.mu.Unlock()
	eventually(t, "the ISR expands", func() bool { st := leader.Partition(tp0()).State(); return len(st.ISR) == 2 })
	if err := produceWait(leader, "y"); err != nil {
		t.Fatalf("acks=all after the expansion: %v", err)
	}
	if st := leader.Stats(); st.ISRShrinks != 1 || st.ISRExpands != 1 {
		t.Fatalf("ISR counts %+v", st)
	}
}
