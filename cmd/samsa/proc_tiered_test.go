package main

// The object store's outage, against a real node (issue 34): a `samsa serve` process
// with tiered storage over a versitygw child process, the store stopped and then
// killed under a producer.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/internal/s3test"
)

// tieredProcKeys are the broker keys of tiered storage over g's bucket. The store's
// call and attempt timeouts (rsm.config.storage.s3.api.call.timeout and
// .attempt.timeout) are short, so that a hung store fails a copy or a read in
// seconds: their defaults, 5 minutes and 30 s, outlast a test.
func tieredProcKeys(g *s3test.Gateway, bucket string, call, attempt time.Duration) map[string]string {
	return map[string]string{
		"remote.log.storage.system.enable":                     "true",
		"remote.log.manager.task.interval.ms":                  "500",
		"rsm.config.storage.s3.bucket.name":                    bucket,
		"rsm.config.storage.s3.region":                         "us-east-1",
		"rsm.config.storage.s3.endpoint.url":                   g.Endpoint,
		"rsm.config.storage.s3.path.style.access.enabled":      "true",
		"rsm.config.storage.aws.access.key.id":                 g.Access,
		"rsm.config.storage.aws.secret.access.key":             g.Secret,
		"rsm.config.chunk.size":                                "4194304",
		"rsm.config.storage.s3.api.call.timeout":               strconv.FormatInt(call.Milliseconds(), 10),
		"rsm.config.storage.s3.api.call.attempt.timeout":       strconv.FormatInt(attempt.Milliseconds(), 10),
		"rlmm.config.remote.log.metadata.topic.num.partitions": "3",
	}
}

// outageEnv is what an outage acts on and checks.
type outageEnv struct {
	c             *procCluster
	cl            *kgo.Client // one client of the node, for ListOffsets and raw Fetch
	g             *s3test.Gateway
	lp            *loadProducer
	topic         string
	outage        time.Duration
	call, attempt time.Duration
	prevLocal     int64 // the earliest local offset at the last outage
	topicID       [16]byte
}

// TestObjectStoreOutage: one node with tiered storage against versitygw, a paced
// producer (acks=all, idempotent) on a tiered topic whose copied segments leave the
// local disk (local.retention.bytes 0). The store is stopped (SIGSTOP) and continued
// (SIGCONT), then killed and started again on the same port over the same directory.
// During each outage the producer's records are acknowledged, a Fetch of the local log
// is served, a Fetch below the local log start answers KAFKA_STORAGE_ERROR (retriable)
// within the store's timeouts, the node stays up, and the copies wait: ListOffsets
// latest-tiered (-5) and earliest-pending-upload (-6) stand still. After it the copies
// resume (both move on) and the same remote read is served. At the end every
// acknowledged record reads back once, every offset from 0, most of them from the
// store. The outages last 4 s; with SAMSA_LONG=1 (make test-long-tiered) 30 s each.
func TestObjectStoreOutage(t *testing.T) {
	bin := samsaBin(t)
	e := &outageEnv{topic: "objstore", outage: 4 * time.Second, call: 3 * time.Second, attempt: time.Second}
	if os.Getenv("SAMSA_LONG") != "" {
		e.outage = 30 * time.Second
	}
	e.g = s3test.Start(t)
	e.g.MakeBucket(t, "tiered")
	e.c = startProcClusterOf(t, bin, procSpec{Roles: []string{"broker,controller"}, Keys: tieredProcKeys(e.g, "tiered", e.call, e.attempt)})
	bootstrap := e.c.Bootstrap()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e.cl = client(t, bootstrap)
	seg, local, ret, on := "65536", "0", "-1", "true"
	r, err := kadm.NewClient(e.cl).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &on, "segment.bytes": &seg,
		"local.retention.bytes": &local, "retention.ms": &ret}, e.topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", e.topic, err)
	}
	e.topicID = r.ID
	// 400 records of 200 bytes a second: a 64 KiB segment sealed every second or so.
	e.lp = startPacedLoad(t, bootstrap, e.topic, 400, 200)
	e.storeDown(ctx, t, false)
	e.storeDown(ctx, t, true)

	acks, maxGap, errs := e.lp.finish()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, the first: %v", len(errs), errs[0])
	}
	end, err := e.listOffset(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	earliestLocal, err := e.listOffset(ctx, -4)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, bootstrap, e.topic)
	checkAcked(t, acks, got)
	for off := int64(0); off < end; off++ {
		if _, ok := got[0][off]; !ok {
			t.Fatalf("offset %d of %d not read back", off, end)
		}
	}
	if int64(len(got[0])) != end {
		t.Fatalf("read %d records, the log ends at %d", len(got[0]), end)
	}
	copyErrs, fetchErrs := remoteErrorCounts(t, e.c.Node(1).Admin)
	t.Logf("%d records acknowledged (longest gap %v), read back from offset 0 (%d of them below the local log start, from the store); %.0f copy errors, %.0f remote fetch errors counted",
		len(acks), maxGap.Round(time.Millisecond), earliestLocal, copyErrs, fetchErrs)
	if copyErrs == 0 || fetchErrs == 0 {
		t.Fatalf("samsa_remote_copy_errors_total %.0f, samsa_remote_fetch_errors_total %.0f: the outages were not seen", copyErrs, fetchErrs)
	}
}

// storeDown takes the store away for e.outage (SIGSTOP, or with kill SIGKILL and a
// start on the same port), checks the node meanwhile, brings the store back and checks
// that the copies and the remote reads resume.
func (e *outageEnv) storeDown(ctx context.Context, t *testing.T, kill bool) {
	t.Helper()
	how := "stopped (SIGSTOP)"
	if kill {
		how = "killed (SIGKILL)"
	}
	// The local log start past the segment the last outage read from the store (whose
	// chunk is cached now): this outage's remote read needs the store.
	eventually(t, 60*time.Second, "the local log start past the last outage's", func() error {
		off, err := e.listOffset(ctx, -4)
		if err == nil && off <= e.prevLocal {
			err = fmt.Errorf("earliest local %d", off)
		}
		return err
	})
	copyErrs, _ := remoteErrorCounts(t, e.c.Node(1).Admin)
	began := time.Now()
	acked := e.lp.acked()
	if kill {
		e.g.Kill()
	} else {
		e.g.Pause(t)
	}
	// A copy whose uploads were all done before the outage may still record itself:
	// the positions are taken once they have stayed the same for half a second. A task
	// whose copy failed does not go on to local retention: the local log start may
	// trail the copies.
	var tiered, pending, local int64
	var still time.Time
	eventually(t, 15*time.Second, "the positions still with the store "+how, func() error {
		var pos [3]int64
		for i, ts := range []int64{-5, -6, -4} {
			off, err := e.listOffset(ctx, ts)
			if err != nil {
				return err
			}
			pos[i] = off
		}
		if pos != [3]int64{tiered, pending, local} || still.IsZero() {
			tiered, pending, local, still = pos[0], pos[1], pos[2], time.Now()
		}
		if time.Since(still) < 500*time.Millisecond {
			return errors.New("moved in the last half second")
		}
		if local <= e.prevLocal || tiered < local-1 || pending != tiered+1 {
			return fmt.Errorf("latest tiered %d, earliest pending upload %d, earliest local %d", tiered, pending, local)
		}
		return nil
	})
	e.prevLocal = local
	// The record before the local log start: in a copy, so read from the store, and in a
	// segment never read before (no chunk of it cached).
	remoteAt := local - 1
	// The outage lasts e.outage, and until a copy has failed (one is due every second
	// or so: a segment sealed while the store is away).
	var reads, expiries int
	var slowest time.Duration
	copyFailed := func() bool {
		n, _ := remoteErrorCounts(t, e.c.Node(1).Admin)
		return n > copyErrs
	}
	for reads == 0 || time.Since(began) < e.outage || !copyFailed() {
		if time.Since(began) > e.outage+30*time.Second {
			t.Fatalf("store %s: no copy tried and failed in %v", how, time.Since(began))
		}
		// A read the store fails (refused, or past its call timeout) answers
		// KAFKA_STORAGE_ERROR; one the store leaves hanging is answered empty without
		// an error once remote.fetch.max.wait.ms (500 ms) has passed, as Kafka's
		// DelayedRemoteFetch expires, and goes on in the background.
		code, n, took := e.fetch(ctx, t, remoteAt)
		expired := code == 0 && n == 0 && took >= 400*time.Millisecond
		if code != kerr.KafkaStorageError.Code && !expired {
			t.Fatalf("store %s: a Fetch at %d (below the local log start %d) answered error %d with %d bytes in %v, want KAFKA_STORAGE_ERROR or an empty answer after remote.fetch.max.wait.ms",
				how, remoteAt, local, code, n, took)
		}
		if expired {
			expiries++
		}
		if took > e.call+5*time.Second {
			t.Fatalf("store %s: a Fetch from remote storage took %v (call timeout %v)", how, took, e.call)
		}
		slowest = max(slowest, took)
		if code, n, _ := e.fetch(ctx, t, local); code != 0 || n == 0 {
			t.Fatalf("store %s: a Fetch of the local log at %d answered error %d with %d bytes", how, local, code, n)
		}
		reads++
		time.Sleep(200 * time.Millisecond) // the outage lasts e.outage: reads meanwhile
	}
	during := e.lp.acked() - acked
	gap := e.lp.gapSince(began)
	if t2, p2 := e.mustOffset(ctx, t, -5), e.mustOffset(ctx, t, -6); t2 != tiered || p2 != pending {
		t.Fatalf("store %s: copies went on: latest tiered %d -> %d, earliest pending upload %d -> %d", how, tiered, t2, pending, p2)
	}
	if !e.c.Running(1) {
		t.Fatalf("store %s: the node exited", how)
	}
	if want := int(e.outage.Seconds()) * 100; during < want || gap > 5*time.Second {
		t.Fatalf("store %s: %d records acknowledged in %v (want %d), longest gap %v", how, during, time.Since(began), want, gap)
	}
	if kill {
		e.g.Restart(t)
	} else {
		e.g.Resume(t)
	}
	down := time.Since(began)
	healed := time.Now()
	took := eventually(t, 60*time.Second, "copies past the outage's", func() error {
		t2, err := e.listOffset(ctx, -5)
		if err != nil {
			return err
		}
		p2, err := e.listOffset(ctx, -6)
		if err != nil {
			return err
		}
		if t2 <= tiered || p2 <= pending {
			return fmt.Errorf("latest tiered %d, earliest pending upload %d", t2, p2)
		}
		return nil
	})
	eventually(t, 30*time.Second, "a remote read once the store is back", func() error {
		if code, n, _ := e.fetch(ctx, t, remoteAt); code != 0 || n == 0 {
			return fmt.Errorf("error %d, %d bytes", code, n)
		}
		return nil
	})
	t.Logf("store %s for %v: %d records acknowledged meanwhile (longest gap %v), %d remote reads, %d answered KAFKA_STORAGE_ERROR and %d empty after remote.fetch.max.wait.ms (slowest in %v), local reads served, copies failed; copies resumed %v after it came back, the remote read %v after",
		how, down.Round(time.Millisecond), during, gap.Round(time.Millisecond), reads, reads-expiries, expiries, slowest.Round(time.Millisecond), took.Round(time.Millisecond),
		time.Since(healed).Round(time.Millisecond))
}

// listOffset is ListOffsets (v11) of partition 0 at timestamp ts: -1 latest, -4
// earliest local, -5 latest tiered, -6 earliest pending upload.
func (e *outageEnv) listOffset(ctx context.Context, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(11)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = e.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets %d: %d topics in the answer", ts, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	return p.Offset, nil
}

func (e *outageEnv) mustOffset(ctx context.Context, t *testing.T, ts int64) int64 {
	t.Helper()
	off, err := e.listOffset(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// fetch sends one Fetch (by topic name and id) of partition 0 at offset to the node and
// returns the partition's error code, the bytes of records and how long the answer took.
func (e *outageEnv) fetch(ctx context.Context, t *testing.T, offset int64) (int16, int, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = e.topic, e.topicID // the client may send a version that names it by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 0, offset, 64<<10, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp, err := req.RequestWith(ctx, e.cl.SeedBrokers()[0])
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Fetch at %d: %v (after %v)", offset, err, took)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch at %d: error %d, %d topics", offset, resp.ErrorCode, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, len(p.RecordBatches), took
}

// startPacedLoad is startLoad at perSecond records of size bytes each ("v-%08d"
// padded), sent every 10 ms, uncompressed.
func startPacedLoad(t *testing.T, bootstrap, topic string, perSecond, size int) *loadProducer {
	t.Helper()
	cl := client(t, bootstrap, kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(1000), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // size bytes a record on disk
	ctx, cancel := context.WithCancel(context.Background())
	lp := &loadProducer{stop: cancel, abort: cl.Close, done: make(chan struct{}), lastAck: time.Now()}
	pad := strings.Repeat(".", max(0, size-10))
	go func() {
		defer close(lp.done)
		var wg sync.WaitGroup
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			for range perSecond / 100 {
				if ctx.Err() != nil {
					break
				}
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%08d%s", i, pad))}, lp.produced(&wg))
				i++
			}
		}
		wg.Wait()
	}()
	return lp
}

// gapSince is the longest time without an acknowledgement since since (to now).
func (lp *loadProducer) gapSince(since time.Time) time.Duration {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	var gap time.Duration
	prev := since
	for _, a := range lp.acks {
		if a.At.Before(since) {
			continue
		}
		gap = max(gap, a.At.Sub(prev))
		prev = a.At
	}
	return max(gap, time.Since(prev))
}

// remoteErrorCounts reads samsa_remote_copy_errors_total and
// samsa_remote_fetch_errors_total (summed over topics) from the admin listener's
// /metrics.
func remoteErrorCounts(t *testing.T, admin string) (copyErrs, fetchErrs float64) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum *float64
		switch {
		case strings.HasPrefix(line, "samsa_remote_copy_errors_total"):
			sum = &copyErrs
		case strings.HasPrefix(line, "samsa_remote_fetch_errors_total"):
			sum = &fetchErrs
		default:
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			*sum += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return copyErrs, fetchErrs
}
