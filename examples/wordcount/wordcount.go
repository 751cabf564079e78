// Package wordcount is a Streams-style stateful processor on franz-go: Kafka
// Streams' word count, exactly once. It reads lines from an input topic, keeps each
// word's count in a table whose changelog is a compacted topic, and writes every
// changed count to an output topic.
//
//	lines ──▶ split into words ──▶ counts (in memory) ──▶ word-counts (word → count)
//	                                  │   ▲
//	                                  ▼   │ restore on start
//	                       word-counts-changelog (compacted: cleanup.policy=compact)
//
// Each poll of the input is one transaction (kgo.GroupTransactSession): the changelog
// records, the output records and the input offsets (TxnOffsetCommit) are committed
// together or not at all, so the counts a read_committed reader sees count every line
// exactly once, across crashes and restarts. On start the processor
//
//  1. fences the previous incarnation of its transactional id (InitProducerID): its
//     open transaction, if any, is aborted and it can commit nothing more;
//  2. restores the table by reading the changelog, read_committed, up to its last
//     stable offset (with no open transaction left, everything committed);
//  3. joins the consumer group (a static member, so that a restarted instance takes
//     its predecessor's place at once) and resumes from the committed input offsets.
//
// A transaction that aborts (a rebalance during it, a failed produce) drops its
// changes to the table and the session rewinds the input to the committed offsets.
//
// Not done: the table is global, so one instance holds all input partitions (start
// one at a time; a second one would count independently). Kafka Streams would
// repartition by word through an internal topic and shard the table by partition.
package wordcount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config names the topics, the group and the identities of a processor.
type Config struct {
	Brokers         []string
	Input           string // lines
	Output          string // word → count, each change
	Changelog       string // word → count, compacted
	Group           string // the consumer group whose offsets are committed in the transactions
	TransactionalID string // the same across restarts: a new instance fences the old one
	InstanceID      string // static group membership: the same across restarts
	MaxPollRecords  int    // input records per transaction; 0 is 500
	Logger          *slog.Logger

	// beforeCommit, when set, is called once a transaction's records are flushed
	// to the broker and before it is committed, with the transaction's number
	// (from 1) and its record count. Returning true makes the processor stop
	// there as a crash would: the client is closed without ending the
	// transaction or leaving the group, and Run returns errCrashed.
	beforeCommit func(txn, records int) bool
}

var errCrashed = errors.New("wordcount: stopped before committing (a simulated crash)")

// Words splits a line into its words: runs of letters and digits, lower-cased.
func Words(line string) []string {
	fields := strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, f := range fields {
		fields[i] = strings.ToLower(f)
	}
	return fields
}

// Run processes until ctx ends (then it returns nil) or a transaction fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxPollRecords <= 0 {
		cfg.MaxPollRecords = 500
	}
	if err := fence(ctx, cfg); err != nil {
		return err
	}
	counts, err := Restore(ctx, cfg.Brokers, cfg.Changelog)
	if err != nil {
		return err
	}
	cfg.Logger.Info("restored the counts from the changelog", "words", len(counts))

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(cfg.Group),
		kgo.InstanceID(cfg.InstanceID),
		kgo.ConsumeTopics(cfg.Input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	crashed := false
	defer func() {
		if !crashed {
			sess.Close() // a static member: it does not leave the group
		}
	}()

	// Cancelling ctx stops the processor between transactions: a transaction
	// begun is ended (committed, or aborted on failure) under a context of its own.
	for txn := 1; ; txn++ {
		fs := sess.PollRecords(ctx, cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			cfg.Logger.Warn("fetch", "topic", t, "partition", p, "err", err)
		})
		if fs.NumRecords() == 0 {
			txn--
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		changed := map[string]int64{}
		fs.EachRecord(func(r *kgo.Record) {
			for _, w := range Words(string(r.Value)) {
				c, ok := changed[w]
				if !ok {
					c = counts[w]
				}
				changed[w] = c + 1
			}
		})
		recs := make([]*kgo.Record, 0, 2*len(changed))
		for w, c := range changed {
			v := []byte(strconv.FormatInt(c, 10))
			recs = append(recs, &kgo.Record{Topic: cfg.Changelog, Key: []byte(w), Value: v},
				&kgo.Record{Topic: cfg.Output, Key: []byte(w), Value: v})
		}
		txnCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		produceErr := sess.ProduceSync(txnCtx, recs...).FirstErr()
		if cfg.beforeCommit != nil && cfg.beforeCommit(txn, len(recs)) {
			cancel()
			crashed = true
			sess.Client().Close()
			return errCrashed
		}
		how := kgo.TryCommit
		if produceErr != nil {
			cfg.Logger.Warn("aborting: a produce failed", "err", produceErr)
			how = kgo.TryAbort
		}
		committed, err := sess.End(txnCtx, how)
		cancel()
		if err != nil {
			return fmt.Errorf("ending transaction %d: %w", txn, err)
		}
		if committed {
			for w, c := range changed {
				counts[w] = c
			}
		} else {
			cfg.Logger.Info("transaction aborted; the input rewinds to the committed offsets", "txn", txn)
		}
	}
}

// fence sends InitProducerID for cfg's transactional id until the coordinator
// accepts it: the previous producer of the id is fenced and its open transaction
// aborted (the coordinator answers CONCURRENT_TRANSACTIONS until the abort is done).
func fence(ctx context.Context, cfg Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(cfg.TransactionalID)
		req.TransactionTimeoutMillis = 30000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
			errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond): // the coordinator finishes the abort
			}
		default:
			return fmt.Errorf("fencing transactional id %s: %w", cfg.TransactionalID, err)
		}
	}
}
