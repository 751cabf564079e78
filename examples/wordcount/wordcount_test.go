package wordcount

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// text returns n lines of words drawn, with a fixed seed, from a vocabulary of 40
// (mixed case and punctuation, which Words removes), and each word's count.
func text(n int) ([]string, map[string]int64) {
	rng := rand.New(rand.NewPCG(15, 1))
	vocab := make([]string, 40)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("word%02d", i)
	}
	counts := map[string]int64{}
	lines := make([]string, n)
	for i := range lines {
		words := make([]string, 1+rng.IntN(12))
		for j := range words {
			w := vocab[rng.IntN(len(vocab))]
			counts[w]++
			if rng.IntN(5) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:] + ","
			}
			words[j] = w
		}
		lines[i] = strings.Join(words, " ")
	}
	return lines, counts
}

func TestWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"The cat, the HAT.", []string{"the", "cat", "the", "hat"}},
		{"  a1 b-2\tc_3 ", []string{"a1", "b", "2", "c", "3"}},
		{"Ünïcode wörds", []string{"ünïcode", "wörds"}},
	} {
		if got := Words(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestWordCountExactlyOnce runs the word count against a real Samsa broker: 1,200
// lines are produced, the first processor crashes inside its fourth transaction
// (after that transaction's records reached the broker, before its commit), 800
// more lines are produced, and a second processor with the same transactional and
// instance ids takes over. The last count per word in the output topic and in the
// changelog (both read_committed) must equal the counts of the text exactly, and a
// fresh restore from the changelog must give them too. The changelog's segments are
// small and the cleaner quick, so it is compacted (around the transactions' markers)
// while the processors run and before the restores read it.
func TestWordCountExactlyOnce(t *testing.T) {
	// The cleaner looks for work every 50 ms (Kafka: 15 s), so that the changelog,
	// in segments of 2 KiB, is compacted while the test runs.
	addr := startBroker(t, "--set", "log.cleaner.backoff.ms=50")
	ctx := ctxFor(t, 3*time.Minute)
	cfg := Config{
		Brokers: []string{addr}, Input: "lines", Output: "word-counts", Changelog: "word-counts-changelog",
		Group: "wordcount", TransactionalID: "wordcount-1", InstanceID: "wordcount-1", MaxPollRecords: 100,
	}
	lines, want := text(2000)
	cl := newClient(t, addr, kgo.DefaultProduceTopic(cfg.Input))
	adm := kadm.NewClient(cl)
	for topic, configs := range map[string]map[string]*string{
		cfg.Input: nil, cfg.Output: nil, cfg.Changelog: {
			"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("2048"),
			"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		},
	} {
		if _, err := adm.CreateTopic(ctx, 3, 1, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(lines []string) {
		t.Helper()
		recs := make([]*kgo.Record, len(lines))
		for i, l := range lines {
			recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(l)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(lines[:1200])

	// The first processor crashes in its fourth transaction.
	crashed := make(chan int, 1)
	first := cfg
	first.beforeCommit = func(txn, records int) bool {
		if txn < 4 {
			return false
		}
		crashed <- records
		return true
	}
	if err := Run(ctx, first); !errors.Is(err, errCrashed) {
		t.Fatalf("the first processor returned %v, want its crash", err)
	}
	if n := <-crashed; n == 0 {
		t.Fatal("the crashed transaction wrote no records")
	} else {
		t.Logf("the first processor crashed with %d records of an open transaction on the broker", n)
	}

	produce(lines[1200:])
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg) }()
	eventually(t, 90*time.Second, "the second processor commits every line", func() error {
		select {
		case err := <-done:
			return fmt.Errorf("the second processor stopped: %v", err)
		default:
		}
		ends, err := adm.ListEndOffsets(ctx, cfg.Input)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, cfg.Group)
		if err != nil {
			return err
		}
		var behind []string
		ends.Each(func(e kadm.ListedOffset) {
			if c, ok := committed.Lookup(cfg.Input, e.Partition); !ok || c.At < e.Offset {
				behind = append(behind, fmt.Sprintf("%d: %d of %d", e.Partition, c.At, e.Offset))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("committed input offsets behind the end: %v", behind)
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the second processor: %v", err)
	}

	outRecs := checkLastValues(t, addr, cfg.Output, want)
	logRecs := checkLastValues(t, addr, cfg.Changelog, want)
	if logRecs >= outRecs {
		t.Logf("the changelog was not compacted while the test ran (%d records, the output %d)", logRecs, outRecs)
	}
	restored, err := Restore(ctx, cfg.Brokers, cfg.Changelog)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(restored, want); d != "" {
		t.Errorf("restored from the changelog: %s", d)
	}
}

// checkLastValues reads topic from the start, read_committed, with a plain consumer
// until the last value of each key equals want; a count above want (a line counted
// twice) fails at once. It returns the number of records it read.
func checkLastValues(t *testing.T, addr, topic string, want map[string]int64) int {
	t.Helper()
	r := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string]int64{}
	records := 0
	eventually(t, 30*time.Second, topic+" holds the exact counts", func() error {
		pctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		fs := r.PollFetches(pctx)
		var bad error
		fs.EachRecord(func(rec *kgo.Record) {
			records++
			c, err := strconv.ParseInt(string(rec.Value), 10, 64)
			if err != nil {
				bad = fmt.Errorf("offset %d: value %q", rec.Offset, rec.Value)
			}
			got[string(rec.Key)] = c
			if c > want[string(rec.Key)] {
				t.Fatalf("%s: %q counted %d, more than the %d in the text", topic, rec.Key, c, want[string(rec.Key)])
			}
		})
		if bad != nil {
			t.Fatalf("%s: %v", topic, bad)
		}
		if d := diff(got, want); d != "" {
			return errors.New(d)
		}
		return nil
	})
	t.Logf("%s: %d records read, the last of each of %d words exact", topic, records, len(got))
	return records
}

// diff describes how got differs from want, or is "" when they are equal.
func diff(got, want map[string]int64) string {
	var out []string
	for w, c := range want {
		if got[w] != c {
			out = append(out, fmt.Sprintf("%s=%d (want %d)", w, got[w], c))
		}
	}
	for w, c := range got {
		if _, ok := want[w]; !ok {
			out = append(out, fmt.Sprintf("%s=%d (not in the text)", w, c))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
