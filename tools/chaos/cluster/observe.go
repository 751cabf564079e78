package cluster

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Observer reads, from outside, what the harness's replica check needs of one node:
// its Metadata answer (the ISR of each partition as the node's image has it), the
// high watermarks it answers for the partitions it leads (ListOffsets latest,
// read_uncommitted), and from its admin listener's Prometheus text (/metrics) the log
// end offset of each partition it holds (samsa_log_end_offset) and the metadata offset
// of the image it answers from (samsa_metadata_applied_offset). Every request goes to
// this node only and is tried once. Safe for concurrent use.
type Observer struct {
	n    *Node
	cl   *kgo.Client
	http *http.Client
	url  string
}

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Observer makes an observer of node n; Timeout bounds each request.
func (c *Cluster) Observer(n *Node, timeout time.Duration) (*Observer, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0), kgo.RetryTimeout(timeout),
		kgo.DialTimeout(timeout), kgo.RequestTimeoutOverhead(timeout), kgo.MetadataMinAge(time.Hour), kgo.MetadataMaxAge(time.Hour)},
		c.AdminOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: observer of node %d: %w", n.ID, err)
	}
	return &Observer{n: n, cl: cl, http: &http.Client{Timeout: timeout}, url: "http://" + n.AdminAddr() + "/metrics"}, nil
}

// Close closes the observer's clients.
func (o *Observer) Close() {
	o.cl.Close()
	o.http.CloseIdleConnections()
}

// Scrape is one read of a node's /metrics.
type Scrape struct {
	Start, End time.Time
	// Applied is samsa_metadata_applied_offset, -1 when absent.
	Applied int64
	// LEO holds samsa_log_end_offset of the partitions of the topics asked for.
	LEO map[TP]int64
	Err error
}

// Scrape reads the node's /metrics, keeping the log ends of topics (all when nil).
func (o *Observer) Scrape(ctx context.Context, topics map[string]bool) Scrape {
	s := Scrape{Start: time.Now(), Applied: -1}
	defer func() { s.End = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
	if err != nil {
		s.Err = err
		return s
	}
	resp, err := o.http.Do(req)
	if err != nil {
		s.Err = err
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		s.Err = fmt.Errorf("cluster: node %d /metrics: %s", o.n.ID, resp.Status)
		return s
	}
	s.Applied, s.LEO, s.Err = ParseReplicaMetrics(resp.Body, topics)
	s.End = time.Now()
	return s
}

// ParseReplicaMetrics reads Prometheus text exposition and returns
// samsa_metadata_applied_offset (-1 when absent) and samsa_log_end_offset per
// partition of topics (every topic when nil). Other lines are skipped unparsed.
func ParseReplicaMetrics(r io.Reader, topics map[string]bool) (applied int64, leo map[TP]int64, err error) {
	applied = -1
	leo = map[TP]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "samsa_metadata_applied_offset"):
			name, _, v, ok := parseSample(line)
			if ok && name == "samsa_metadata_applied_offset" {
				applied = int64(v)
			}
		case strings.HasPrefix(line, "samsa_log_end_offset{"):
			_, labels, v, ok := parseSample(line)
			if !ok {
				continue
			}
			p, perr := strconv.ParseInt(labels["partition"], 10, 32)
			t := labels["topic"]
			if perr != nil || t == "" || (topics != nil && !topics[t]) {
				continue
			}
			leo[TP{t, int32(p)}] = int64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return -1, nil, fmt.Errorf("cluster: metrics: %w", err)
	}
	return applied, leo, nil
}

// parseSample reads `name{l="v",...} value [timestamp]`.
func parseSample(line string) (name string, labels map[string]string, v float64, ok bool) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, 0, false
	}
	name, rest := line[:i], line[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return "", nil, 0, false
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, false
			}
			labels[key] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// PartitionISR is one partition of a node's Metadata answer.
type PartitionISR struct {
	TP
	TopicID  string
	Leader   int32
	Replicas []int32
	ISR      []int32
}

// MetadataAnswer is the node's Metadata answer for the topics asked for; topics it
// does not know (or refuses) are left out.
type MetadataAnswer struct {
	Start, End time.Time
	Parts      []PartitionISR
	Err        error
}

// Metadata asks the node for topics.
func (o *Observer) Metadata(ctx context.Context, topics []string) MetadataAnswer {
	a := MetadataAnswer{Start: time.Now()}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := o.seed().Request(ctx, req)
	a.End = time.Now()
	if err != nil {
		a.Err = err
		return a
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			continue
		}
		id := ""
		if t.TopicID != ([16]byte{}) {
			id = hex.EncodeToString(t.TopicID[:])
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code && p.ErrorCode != kerr.ReplicaNotAvailable.Code {
				continue
			}
			a.Parts = append(a.Parts, PartitionISR{TP: TP{*t.Topic, p.Partition}, TopicID: id, Leader: p.Leader,
				Replicas: append([]int32(nil), p.Replicas...), ISR: append([]int32(nil), p.ISR...)})
		}
	}
	return a
}

// HWAnswer is the high watermarks the node answered (the partitions it leads).
type HWAnswer struct {
	Start, End time.Time
	HW         map[TP]int64
	Err        error
}

// HighWatermarks asks the node, with one ListOffsets (latest, read_uncommitted), the
// high watermark of every partition of parts; those it does not lead are left out.
func (o *Observer) HighWatermarks(ctx context.Context, parts []TP) HWAnswer {
	a := HWAnswer{Start: time.Now(), HW: map[TP]int64{}}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 0
	idx := map[string]int{}
	for _, tp := range parts {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.Timestamp = -1
		rp.CurrentLeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if len(req.Topics) == 0 {
		a.End = time.Now()
		return a
	}
	resp, err := o.seed().Request(ctx, req)
	a.End = time.Now()
	if err != nil {
		a.Err = err
		return a
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				a.HW[TP{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return a
}

func (o *Observer) seed() *kgo.Broker { return o.cl.SeedBrokers()[0] }
