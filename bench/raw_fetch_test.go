package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchFrame frames resp as a broker sends it: size, correlation id, the header's
// tags (flexible versions), the body.
func fetchFrame(resp *kmsg.FetchResponse, corr int32) []byte {
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	if resp.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = resp.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

func TestReadFetch(t *testing.T) {
	b1 := AppendRecordBatch(nil, 3, []byte("abc"), 0)
	b2 := AppendRecordBatch(nil, 5, []byte("defgh"), 0)
	binary.BigEndian.PutUint64(b1, 10)
	binary.BigEndian.PutUint64(b2, 13)
	two := append(append([]byte(nil), b1...), b2...)
	partial := append(append([]byte(nil), b1...), b2[:30]...) // ends inside a batch
	for v := int16(4); v <= rawMaxFetchVersion; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		resp.ErrorCode = 0
		if v >= 7 {
			resp.ErrorCode = 3
		}
		for ti, name := range []string{"a", "bb"} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = name
			for pi, recs := range [][]byte{two, partial, nil, {}} {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = int32(10*ti + pi)
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 18, 18, 0
				rp.RecordBatches = recs
				if pi == 1 {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = 7, 11
					rp.AbortedTransactions = append(rp.AbortedTransactions, at, at)
					rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 4, 12 // a tag at v12+
				}
				if pi == 2 {
					rp.ErrorCode = 1
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		frame := fetchFrame(resp, 42)
		rc := &rawConn{br: bufio.NewReader(bytes.NewReader(append(frame, 0xEE)))}
		var got []fetchedPartition
		code, err := rc.readFetch(kmsg.NewPtrFetchResponse(), v, 42, func(p fetchedPartition) { got = append(got, p) })
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if code != resp.ErrorCode {
			t.Errorf("v%d: error code %d, want %d", v, code, resp.ErrorCode)
		}
		want := []fetchedPartition{
			{partition: 0, records: 8, bytes: int64(len(two)), next: 18},
			{partition: 1, records: 3, bytes: int64(len(b1)), next: 13},
			{partition: 2, errorCode: 1, next: -1},
			{partition: 3, next: -1},
			{partition: 10, records: 8, bytes: int64(len(two)), next: 18},
			{partition: 11, records: 3, bytes: int64(len(b1)), next: 13},
			{partition: 12, errorCode: 1, next: -1},
			{partition: 13, next: -1},
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: %d partitions %+v, want %d", v, len(got), got, len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("v%d: partition %d: %+v, want %+v", v, i, got[i], want[i])
			}
		}
		if b, err := rc.br.ReadByte(); err != nil || b != 0xEE {
			t.Errorf("v%d: the response was not read to its end exactly (next byte %x, %v)", v, b, err)
		}
		// A wrong correlation id and a truncated frame are errors, not hangs.
		rc = &rawConn{br: bufio.NewReader(bytes.NewReader(frame))}
		if _, err := rc.readFetch(kmsg.NewPtrFetchResponse(), v, 41, func(fetchedPartition) {}); err == nil {
			t.Errorf("v%d: a wrong correlation id was accepted", v)
		}
		for _, cut := range []int{9, len(frame) / 2, len(frame) - 1} {
			rc = &rawConn{br: bufio.NewReader(bytes.NewReader(frame[:cut]))}
			if _, err := rc.readFetch(kmsg.NewPtrFetchResponse(), v, 42, func(fetchedPartition) {}); err == nil {
				t.Errorf("v%d: a frame cut at %d of %d was accepted", v, cut, len(frame))
			}
		}
	}
}

// BenchmarkRawReadFetch is the raw fetcher's read of one Fetch response as a backlog
// drain gets them: 6 partitions of 8 MiB of 1 MiB batches of 1 KiB records, sent
// with sendfile from a (page-cached) file over loopback TCP, as the broker does.
func BenchmarkRawReadFetch(b *testing.B) {
	value := make([]byte, 1024)
	batch := AppendRecordBatch(nil, 954, value, 0)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = rawMaxFetchVersion
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	var recs []byte
	for range 8 {
		recs = append(recs, batch...)
	}
	for p := range int32(6) {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = p
		rp.RecordBatches = recs
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = []kmsg.FetchResponseTopic{rt}
	frame := fetchFrame(resp, 0)
	path := filepath.Join(b.TempDir(), "frame")
	if err := os.WriteFile(path, frame[8:], 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hdr := append([]byte(nil), frame[:8]...)
		for corr := uint32(1); ; corr++ {
			binary.BigEndian.PutUint32(hdr[4:], corr)
			if _, err := c.Write(hdr); err != nil {
				return
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return
			}
			if _, err := c.(*net.TCPConn).ReadFrom(io.LimitReader(f, int64(len(frame)-8))); err != nil {
				return // sendfile
			}
		}
	}()
	rc, err := dialRaw(b.Context(), ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	scratch := kmsg.NewPtrFetchResponse()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	corr := int32(0)
	for b.Loop() {
		corr++
		var n int64
		if _, err := rc.readFetch(scratch, rawMaxFetchVersion, corr, func(p fetchedPartition) { n += p.records }); err != nil {
			b.Fatal(err)
		}
		if n != 6*8*954 {
			b.Fatalf("%d records", n)
		}
	}
}
