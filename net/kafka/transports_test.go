package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/engine"
	"github.com/samsa-broker/samsa/net/transport"
)

// The broker over each transport (net/transport may not import this package, so
// these cases live here), with real clients: franz-go producing with the
// fsync durability policy (answers sent later from the flusher's goroutine) and
// consuming (Fetch answered with sendfile), plus malformed input on raw sockets.

func kafkaKinds() []string {
	if runtime.GOOS == "linux" {
		return []string{transport.KindStd, transport.KindReactor}
	}
	return []string{transport.KindStd}
}

func startKafka(t *testing.T, kind string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	node := startSingleNode(t, t.TempDir(), Config{NodeID: 1, ClusterID: "conformance", Host: "127.0.0.1", Port: int32(port)},
		singleNodeOptions{Sync: engine.SyncFsync})
	tr, err := transport.New(kind, transport.ReactorConfig{Loops: 2}, node.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ln) }()
	t.Cleanup(func() {
		// Past a long-poll fetch's wait (franz-go's is 5 s): the drain answers it first.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, transport.ErrClosed) {
			t.Errorf("serve: %v", err)
		}
		if err := node.close(); err != nil {
			t.Errorf("closing the node: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestConformanceKafkaProduceConsume(t *testing.T) {
	for _, kind := range kafkaKinds() {
		t.Run(kind, func(t *testing.T) {
			addr := startKafka(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("conf"),
				kgo.ConsumeTopics("conf"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, "conf"); err != nil {
				t.Fatal(err)
			}
			const n = 3000
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("value-%05d", i))}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			seen := make(map[string]bool, n)
			for len(seen) < n {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			}
			for i := range n {
				if !seen[fmt.Sprintf("value-%05d", i)] {
					t.Fatalf("record %d not consumed", i)
				}
			}
		})
	}
}

// Malformed input closes the offending connection (or answers an error) and the
// broker goes on serving.
func TestConformanceKafkaBadInput(t *testing.T) {
	for _, kind := range kafkaKinds() {
		t.Run(kind, func(t *testing.T) {
			addr := startKafka(t, kind)
			bad := [][]byte{
				{0xff, 0xff, 0xff, 0xff},                           // negative size
				{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 3},              // huge size, few bytes
				{0, 0, 0, 2, 0, 18},                                // header cut short
				{0, 0, 0, 8, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1},         // unknown api key
				{0, 0, 0, 10, 0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0x7f}, // Metadata with a bad client id
			}
			for _, b := range bad {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Write(b)
				// Either an answer or a close, never a hang: read until EOF or an answer.
				var hdr [4]byte
				if _, err := io.ReadFull(c, hdr[:]); err == nil {
					if size := binary.BigEndian.Uint32(hdr[:]); size > 1<<20 {
						t.Fatalf("answer of %d bytes to bad input", size)
					}
				} else if isTimeoutErr(err) {
					t.Fatalf("input %x: no answer and no close", b)
				}
				c.Close()
			}
			// Still serving: ApiVersions and Metadata with a real client.
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
