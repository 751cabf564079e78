package damage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Read is what reading a partition from its start gave.
type Read struct {
	Leader int   `json:"leader"`
	End    int64 `json:"end"` // the high watermark the read aimed at
	// Values read, by offset.
	Values map[int64]string `json:"-"`
	Count  int              `json:"count"`
	Next   int64            `json:"next"` // the offset the read stopped at (End when complete)
	// How it ended: "" (complete), or what stopped it.
	ErrCode string `json:"err_code,omitempty"` // the broker's error code for the partition
	Corrupt string `json:"corrupt,omitempty"`  // a served batch that fails its CRC or does not parse
	Stalled bool   `json:"stalled,omitempty"`  // answers without records or error below End
	Err     string `json:"err,omitempty"`      // a request that failed
	Took    time.Duration
}

// Complete reports whether the read reached End.
func (r *Read) Complete() bool {
	return r.ErrCode == "" && r.Corrupt == "" && !r.Stalled && r.Err == "" && r.Next >= r.End
}

// Outcome says in a few words how the read ended.
func (r *Read) Outcome() string {
	switch {
	case r.Corrupt != "":
		return fmt.Sprintf("SERVED CORRUPT at offset %d (%s) after %d records", r.Next, r.Corrupt, r.Count)
	case r.ErrCode != "":
		return fmt.Sprintf("error %s at offset %d after %d records", r.ErrCode, r.Next, r.Count)
	case r.Stalled:
		return fmt.Sprintf("STALLED at offset %d of %d (no records, no error) after %d records", r.Next, r.End, r.Count)
	case r.Err != "":
		return fmt.Sprintf("request failed at offset %d: %s", r.Next, r.Err)
	}
	return fmt.Sprintf("complete: %d records, offsets 0..%d", r.Count, r.End-1)
}

// rawRead reads topic-partition from leader with Fetch requests from offset 0 up to
// the high watermark of the first answer, checking each batch's CRC-32C itself before
// decoding it: a broker that serves a damaged batch is told from one that refuses it.
// A partition error is retried for a few seconds (a leader that is still loading)
// before it counts; answers without records below the high watermark for stall end
// the read as stalled.
func rawRead(ctx context.Context, cl *kgo.Client, leader int, topic string, partition int32, stall time.Duration) *Read {
	start := time.Now()
	r := &Read{Leader: leader, End: -1, Values: map[int64]string{}}
	defer func() { r.Took = time.Since(start); r.Count = len(r.Values) }()
	var errSince, idleSince time.Time
	for {
		if ctx.Err() != nil {
			r.Err = ctx.Err().Error()
			return r
		}
		resp, err := fetchFrom(ctx, cl, leader, topic, partition, r.Next)
		if err != nil {
			if errSince.IsZero() {
				errSince = time.Now()
			}
			if time.Since(errSince) > stall {
				r.Err = err.Error()
				return r
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		rp, err := fetchedPartition(resp.(*kmsg.FetchResponse))
		if err != nil {
			if errSince.IsZero() {
				errSince = time.Now()
			}
			if time.Since(errSince) > stall {
				var ke *kerr.Error
				if errors.As(err, &ke) {
					r.ErrCode = ke.Message
				} else {
					r.Err = err.Error()
				}
				return r
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		errSince = time.Time{}
		if r.End < 0 {
			r.End = rp.HighWatermark
		}
		if r.Next >= r.End {
			return r
		}
		moved, bad := r.take(rp, topic, partition)
		if bad != "" {
			r.Corrupt = bad
			return r
		}
		if moved {
			idleSince = time.Time{}
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
		}
		if time.Since(idleSince) > stall {
			r.Stalled = true
			return r
		}
	}
}

// fetchFrom sends leader one Fetch of topic-partition from offset (as a consumer,
// read_uncommitted, without a session), with a 5-second deadline.
func fetchFrom(ctx context.Context, cl *kgo.Client, leader int, topic string, partition int32, offset int64) (kmsg.Response, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 300
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = partition
	p.FetchOffset = offset
	p.LogStartOffset = -1
	p.CurrentLeaderEpoch = -1
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.Broker(leader).Request(rctx, req)
}

// fetchedPartition is the one partition of a Fetch answer, or the error of the
// answer or of the partition.
func fetchedPartition(fr *kmsg.FetchResponse) (*kmsg.FetchResponseTopicPartition, error) {
	if fr.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(fr.ErrorCode)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch answer with %d topics", len(fr.Topics))
	}
	rp := &fr.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(rp.ErrorCode)
	}
	return rp, nil
}

// take records the values of the batches fetched before the first damaged one (the
// read stops at it) and moves Next past them. It says whether Next moved, and what
// is wrong with the damaged batch ("" if none).
func (r *Read) take(rp *kmsg.FetchResponseTopicPartition, topic string, partition int32) (moved bool, bad string) {
	at, bad := firstBadBatch(rp.RecordBatches)
	rp.RecordBatches = rp.RecordBatches[:at]
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: r.Next, Topic: topic, Partition: partition}, rp, kgo.DefaultDecompressor(), nil)
	for _, rec := range fp.Records {
		if rec.Offset >= r.Next {
			r.Values[rec.Offset] = string(rec.Value)
			r.Next = rec.Offset + 1
			moved = true
		}
	}
	if bad == "" && fp.Err != nil {
		bad = fp.Err.Error()
	}
	return moved, bad
}

// firstBadBatch finds the first batch of a fetch answer's bytes whose CRC-32C fails
// or whose framing does not hold, and returns its position and a description (len(b)
// and "" when all hold; a partial batch at the end, as brokers may send, is fine).
func firstBadBatch(b []byte) (int, string) {
	for pos := 0; pos+headerLen <= len(b); {
		length := int(int32(binary.BigEndian.Uint32(b[pos+8:])))
		size := prefixLen + length
		if length < headerLen-prefixLen {
			return pos, fmt.Sprintf("batch at byte %d of the answer: length %d", pos, length)
		}
		if pos+size > len(b) {
			return len(b), ""
		}
		bt := b[pos : pos+size]
		if bt[magicAt] == 2 && crc32.Checksum(bt[crcFrom:], castagnoli) != binary.BigEndian.Uint32(bt[crcAt:]) {
			base := int64(binary.BigEndian.Uint64(bt))
			return pos, fmt.Sprintf("batch %d..%d fails its CRC-32C", base, base+int64(int32(binary.BigEndian.Uint32(bt[lastDeltaAt:]))))
		}
		pos += size
	}
	return len(b), ""
}

// Consumed is what a franz-go consumer of the partition saw: the user's view.
type Consumed struct {
	Count  int    `json:"count"`
	Next   int64  `json:"next"`
	Errors int    `json:"errors"`
	First  string `json:"first_error,omitempty"`
	Done   bool   `json:"done"` // read up to end
}

// Outcome says how the consumer fared.
func (c Consumed) Outcome(end int64) string {
	switch {
	case c.Done:
		return fmt.Sprintf("read all %d records", c.Count)
	case c.Errors > 0:
		return fmt.Sprintf("stopped at offset %d after %d records with %d poll errors (first: %s)", c.Next, c.Count, c.Errors, c.First)
	}
	return fmt.Sprintf("HUNG at offset %d of %d after %d records, no error", c.Next, end, c.Count)
}

// consume runs a franz-go consumer of the partition from its start for up to d,
// until it has read up to end.
func consume(ctx context.Context, brokers []string, topic string, partition int32, end int64, d time.Duration) Consumed {
	var c Consumed
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		c.Errors, c.First = 1, err.Error()
		return c
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for ctx.Err() == nil && c.Next < end {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
				continue
			}
			c.Errors++
			if c.First == "" {
				c.First = e.Err.Error()
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			c.Count++
			c.Next = r.Offset + 1
		})
	}
	c.Done = c.Next >= end
	return c
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
