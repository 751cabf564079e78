package main

// samsa transactions: the jobs of Kafka's kafka-transactions.sh (KIP-664), over kadm.
//
//	samsa transactions list [--state S]... [--producer-id N]...
//	samsa transactions describe --transactional-id X
//	samsa transactions describe-producers --topic T --partition P
//	samsa transactions find-hanging (--broker-id N | --topic T [--partition P])
//	      [--max-transaction-timeout MINUTES]
//	samsa transactions abort --topic T --partition P (--start-offset O |
//	      --producer-id N --producer-epoch E --coordinator-epoch C)
//
// list asks every broker (ListTransactions, 66); describe asks the id's coordinator
// (DescribeTransactions, 65); describe-producers asks the partition's leader
// (DescribeProducers, 61).
//
// find-hanging does what Kafka's tool does: the partitions of --topic, or those with a
// replica on --broker-id; their producers with a transaction open whose last write is
// older than --max-transaction-timeout (default 15, transaction.max.timeout.ms'
// default, in minutes) are candidates; a candidate is hanging when no coordinator
// lists a transactional id for its producer id (ListTransactions filtered by
// producer id), the id is not described, or its coordinator does not count the
// partition in the transaction (DescribeTransactions): no one will write its marker,
// and the partition's last stable offset stays behind it, holding back every
// read_committed consumer. Difference from Kafka: the producer states are read from
// each partition's leader (Samsa's DescribeProducers answers on leaders only), where
// Kafka's tool asks broker N's replica.
//
// abort is kafka-transactions.sh abort: the producer whose open transaction starts at
// --start-offset (DescribeProducers), then an ABORT marker for it (WriteTxnMarkers, 27)
// sent to the partition's leader with the producer's epoch and the coordinator epoch
// of its last marker (0 if it has none, as Kafka's tool sends). The broker authorizes
// it as Kafka does: ALTER or CLUSTER_ACTION on the cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("transactions", "transactions: list, describe, describe-producers, find-hanging, abort", runTransactions)
}

const transactionsUsage = `usage: samsa transactions <command> [flags]
  list                      transactional ids, coordinator, producer id, state
                            (--state S, --producer-id N: filters, repeatable)
  describe                  --transactional-id X: state, epoch, timeout, start time,
                            partitions
  describe-producers        --topic T --partition P: the partition's producers,
                            their last sequence and open transaction's start offset
  find-hanging              --broker-id N (partitions with a replica on N) or
                            --topic T [--partition P]; --max-transaction-timeout M
                            (minutes, default 15): open transactions older than M
                            that no coordinator will finish
  abort                     --topic T --partition P --start-offset O: write an ABORT
                            marker for the transaction open at O (or --producer-id N
                            --producer-epoch E --coordinator-epoch C)
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

type txnOpts struct {
	states        repeated
	producerIDs   repeated
	txnID         string
	topic         string
	partition     int
	brokerID      int
	maxTimeout    int
	startOffset   int64
	producerEpoch int
	coordEpoch    int
}

func runTransactions(args []string) int { return transactionsMain(args, os.Stdout) }

// transactionsMain runs `samsa transactions` with its results on out.
func transactionsMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, transactionsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	a := newAdminCmd("transactions "+sub, transactionsUsage)
	var o txnOpts
	fs := a.fs
	fs.Var(&o.states, "state", "list: only transactions in this state (repeatable)")
	fs.Var(&o.producerIDs, "producer-id", "list: only this producer id (repeatable); abort: the producer")
	fs.StringVar(&o.txnID, "transactional-id", "", "describe: the transactional id")
	fs.StringVar(&o.topic, "topic", "", "the topic")
	fs.IntVar(&o.partition, "partition", -1, "the partition")
	fs.IntVar(&o.brokerID, "broker-id", -1, "find-hanging: partitions with a replica on this broker")
	fs.IntVar(&o.brokerID, "broker", -1, "find-hanging: the same as --broker-id")
	fs.IntVar(&o.maxTimeout, "max-transaction-timeout", 15, "find-hanging: minutes (transaction.max.timeout.ms)")
	fs.Int64Var(&o.startOffset, "start-offset", -1, "abort: the first offset of the open transaction")
	fs.IntVar(&o.producerEpoch, "producer-epoch", -1, "abort (without --start-offset): the producer epoch")
	fs.IntVar(&o.coordEpoch, "coordinator-epoch", -2, "abort (without --start-offset): the coordinator epoch (-1: none, sent as 0)")
	pos, ok := a.parse(args[1:])
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(os.Stderr, "samsa transactions %s: unexpected arguments %q\n", sub, pos)
		return 2
	}
	var f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error
	switch sub {
	case "list":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error { return txnList(ctx, adm, out, &o) }
	case "describe":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return txnDescribe(ctx, adm, out, o.txnID, time.Now())
		}
	case "describe-producers":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return txnDescribeProducers(ctx, adm, out, &o)
		}
	case "find-hanging":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return txnFindHanging(ctx, adm, out, &o, time.Now())
		}
	case "abort":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error { return txnAbort(ctx, adm, out, &o) }
	default:
		fmt.Fprintf(os.Stderr, "samsa transactions: unknown command %q\n%s\n", sub, transactionsUsage)
		return 2
	}
	return a.run(f)
}

func parseProducerIDs(ss []string) ([]int64, error) {
	var out []int64
	for _, s := range ss {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--producer-id %q: want a number", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func txnList(ctx context.Context, adm *kadm.Client, w io.Writer, o *txnOpts) error {
	pids, err := parseProducerIDs(o.producerIDs)
	if err != nil {
		return err
	}
	listed, err := adm.ListTransactions(ctx, pids, o.states)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TransactionalId\tCoordinator\tProducerId\tTransactionState")
	for _, l := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", l.TxnID, l.Coordinator, l.ProducerID, l.State)
	}
	return tw.Flush()
}

func txnDescribe(ctx context.Context, adm *kadm.Client, w io.Writer, id string, now time.Time) error {
	if id == "" {
		return errors.New("describe needs --transactional-id")
	}
	described, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		return err
	}
	d, err := described.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		return fmt.Errorf("transactional id %s: %w", id, err)
	}
	start, dur := "None", "None"
	if d.StartTimestamp >= 0 {
		start = strconv.FormatInt(d.StartTimestamp, 10)
		dur = strconv.FormatInt(now.UnixMilli()-d.StartTimestamp, 10)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions")
	fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.Coordinator, d.TxnID, d.ProducerID, d.ProducerEpoch, d.State,
		d.TimeoutMillis, start, dur, orDash(formatTopicsSet(d.Topics)))
	return tw.Flush()
}

// formatTopicsSet is "t-0,t-1,u-3", sorted.
func formatTopicsSet(s kadm.TopicsSet) string {
	var parts []string
	for _, t := range s.Sorted() {
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	return strings.Join(parts, ",")
}

// partitionProducers asks the leader of topic-partition for its producers.
func partitionProducers(ctx context.Context, adm *kadm.Client, topic string, partition int32) (kadm.DescribedProducersPartition, error) {
	s := kadm.TopicsSet{}
	s.Add(topic, partition)
	described, err := adm.DescribeProducers(ctx, s)
	if err != nil {
		return kadm.DescribedProducersPartition{}, err
	}
	dp, ok := described[topic].Partitions[partition]
	if !ok {
		return dp, fmt.Errorf("%s-%d: not in the answer", topic, partition)
	}
	if dp.Err != nil {
		return dp, fmt.Errorf("%s-%d: %w", topic, partition, dp.Err)
	}
	return dp, nil
}

// sortedProducers are dp's producers by producer id.
func sortedProducers(ps kadm.DescribedProducers) []kadm.DescribedProducer {
	out := make([]kadm.DescribedProducer, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

func txnDescribeProducers(ctx context.Context, adm *kadm.Client, w io.Writer, o *txnOpts) error {
	if o.topic == "" || o.partition < 0 {
		return errors.New("describe-producers needs --topic and --partition")
	}
	dp, err := partitionProducers(ctx, adm, o.topic, int32(o.partition))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset")
	for _, p := range sortedProducers(dp.ActiveProducers) {
		start := "None"
		if p.CurrentTxnStartOffset >= 0 {
			start = strconv.FormatInt(p.CurrentTxnStartOffset, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\n", p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, p.LastTimestamp, start)
	}
	return tw.Flush()
}

// hangingSearch is the partitions find-hanging looks at: --topic's (or one of them),
// else every topic's partitions with a replica on --broker-id.
func hangingSearch(ctx context.Context, adm *kadm.Client, o *txnOpts) (kadm.TopicsSet, error) {
	if o.topic == "" && o.brokerID < 0 {
		return nil, errors.New("find-hanging needs --topic or --broker-id to limit the search")
	}
	if o.partition >= 0 && o.topic == "" {
		return nil, errors.New("--partition needs --topic")
	}
	s := kadm.TopicsSet{}
	if o.topic != "" && o.partition >= 0 {
		s.Add(o.topic, int32(o.partition))
		return s, nil
	}
	var topics []string
	if o.topic != "" {
		topics = []string{o.topic}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			if o.brokerID < 0 || containsPartition(p.Replicas, int32(o.brokerID)) {
				s.Add(t.Topic, p.Partition)
			}
		}
	}
	return s, nil
}

// describeProducersBatch bounds the partitions of one DescribeProducers round (Kafka's
// tool asks 500 at a time, so that a broker with many partitions is not sent one
// giant request).
const describeProducersBatch = 500

// chunkTopicsSet splits s into sets of at most n partitions, in topic and partition
// order.
func chunkTopicsSet(s kadm.TopicsSet, n int) []kadm.TopicsSet {
	var out []kadm.TopicsSet
	cur, size := kadm.TopicsSet{}, 0
	for _, t := range s.Sorted() {
		for _, p := range t.Partitions {
			if size == n {
				out, cur, size = append(out, cur), kadm.TopicsSet{}, 0
			}
			cur.Add(t.Topic, p)
			size++
		}
	}
	if size > 0 {
		out = append(out, cur)
	}
	return out
}

// openTxn is a producer's open transaction in a partition.
type openTxn struct {
	topic     string
	partition int32
	p         kadm.DescribedProducer
}

func txnFindHanging(ctx context.Context, adm *kadm.Client, w io.Writer, o *txnOpts, now time.Time) error {
	if o.maxTimeout < 0 {
		return errors.New("--max-transaction-timeout must not be negative")
	}
	search, err := hangingSearch(ctx, adm, o)
	if err != nil {
		return err
	}
	maxMs := int64(o.maxTimeout) * 60_000
	var candidates []openTxn
	for _, chunk := range chunkTopicsSet(search, describeProducersBatch) {
		described, err := adm.DescribeProducers(ctx, chunk)
		if err != nil {
			return err
		}
		var errs []error
		described.EachPartition(func(dp kadm.DescribedProducersPartition) {
			if dp.Err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", dp.Topic, dp.Partition, dp.Err))
				return
			}
			for _, p := range sortedProducers(dp.ActiveProducers) {
				if p.CurrentTxnStartOffset >= 0 && now.UnixMilli()-p.LastTimestamp > maxMs {
					candidates = append(candidates, openTxn{topic: dp.Topic, partition: dp.Partition, p: p})
				}
			}
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	hanging, err := filterHanging(ctx, adm, candidates)
	if err != nil {
		return err
	}
	sort.Slice(hanging, func(i, j int) bool {
		a, b := hanging[i], hanging[j]
		return a.topic < b.topic || a.topic == b.topic && (a.partition < b.partition || a.partition == b.partition && a.p.ProducerID < b.p.ProducerID)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)")
	for _, h := range hanging {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", h.topic, h.partition, h.p.ProducerID, h.p.ProducerEpoch,
			h.p.CoordinatorEpoch, h.p.CurrentTxnStartOffset, h.p.LastTimestamp, (now.UnixMilli()-h.p.LastTimestamp)/60_000)
	}
	return tw.Flush()
}

// filterHanging keeps the candidates no coordinator will finish: no transactional id
// lists their producer id, or its description does not hold their partition.
func filterHanging(ctx context.Context, adm *kadm.Client, candidates []openTxn) ([]openTxn, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	var pids []int64
	seen := map[int64]bool{}
	for _, c := range candidates {
		if !seen[c.p.ProducerID] {
			seen[c.p.ProducerID] = true
			pids = append(pids, c.p.ProducerID)
		}
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the transactions of %d producers: %w", len(pids), err)
	}
	idOf := map[int64]string{}
	var ids []string
	for _, l := range listed.Sorted() {
		if seen[l.ProducerID] {
			idOf[l.ProducerID] = l.TxnID
			ids = append(ids, l.TxnID)
		}
	}
	var described kadm.DescribedTransactions
	if len(ids) > 0 {
		if described, err = adm.DescribeTransactions(ctx, ids...); err != nil {
			return nil, fmt.Errorf("describing %d transactions: %w", len(ids), err)
		}
	}
	var hanging []openTxn
	for _, c := range candidates {
		id, ok := idOf[c.p.ProducerID]
		if !ok {
			hanging = append(hanging, c)
			continue
		}
		d, err := described.On(id, nil)
		switch {
		case errors.Is(err, kerr.TransactionalIDNotFound), errors.Is(d.Err, kerr.TransactionalIDNotFound):
			hanging = append(hanging, c)
		case d.Err != nil:
			return nil, fmt.Errorf("transactional id %s: %w", id, d.Err)
		case !d.Topics.Lookup(c.topic, c.partition):
			hanging = append(hanging, c)
		}
	}
	return hanging, nil
}

func txnAbort(ctx context.Context, adm *kadm.Client, w io.Writer, o *txnOpts) error {
	if o.topic == "" || o.partition < 0 {
		return errors.New("abort needs --topic and --partition")
	}
	tp := fmt.Sprintf("%s-%d", o.topic, o.partition)
	m := kadm.TxnMarkers{Topics: kadm.TopicsSet{}}
	m.Topics.Add(o.topic, int32(o.partition))
	switch {
	case o.startOffset >= 0:
		if len(o.producerIDs) > 0 || o.producerEpoch >= 0 || o.coordEpoch > -2 {
			return errors.New("give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch, not both")
		}
		dp, err := partitionProducers(ctx, adm, o.topic, int32(o.partition))
		if err != nil {
			return fmt.Errorf("the producer states of %s: %w", tp, err)
		}
		found := false
		for _, p := range sortedProducers(dp.ActiveProducers) {
			if p.CurrentTxnStartOffset == o.startOffset {
				m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("no open transaction starts at offset %d of %s", o.startOffset, tp)
		}
	case len(o.producerIDs) == 1 && o.producerEpoch >= 0 && o.coordEpoch >= -1:
		pids, err := parseProducerIDs(o.producerIDs)
		if err != nil {
			return err
		}
		if o.producerEpoch > 32767 {
			return fmt.Errorf("--producer-epoch %d: out of range", o.producerEpoch)
		}
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = pids[0], int16(o.producerEpoch), int32(o.coordEpoch)
	default:
		return errors.New("abort needs --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
	}
	// A producer that never had a marker has coordinator epoch -1; 0 is at most any
	// coordinator's epoch (Kafka's tool does the same).
	m.CoordinatorEpoch = max(m.CoordinatorEpoch, 0)
	resp, err := adm.WriteTxnMarkers(ctx, m)
	if err != nil {
		return fmt.Errorf("aborting the transaction of producer %d on %s: %w", m.ProducerID, tp, err)
	}
	r, ok := resp[m.ProducerID].Topics[o.topic].Partitions[int32(o.partition)]
	if !ok {
		return fmt.Errorf("aborting the transaction of producer %d on %s: the partition is not in the answer", m.ProducerID, tp)
	}
	if r.Err != nil {
		return fmt.Errorf("aborting the transaction of producer %d on %s: %w", m.ProducerID, tp, r.Err)
	}
	fmt.Fprintf(w, "Aborted the transaction of producer %d (epoch %d, coordinator epoch %d) on %s (leader %d).\n",
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, tp, r.NodeID)
	return nil
}
