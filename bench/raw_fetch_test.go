package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
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
// with sendfile from a (page-cached) file over loopback TCP, as the broker does. Its
// cpu-ns/op is the reading goroutine's thread's CPU time per response.
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
	// Four copies of the body (192 MiB, beyond the CPU caches, as a backlog is): the
	// bytes each response copies come from memory, not from a cache.
	const copies = 4
	path := filepath.Join(b.TempDir(), "frame")
	if err := os.WriteFile(path, bytes.Repeat(frame[8:], copies), 0o600); err != nil {
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
			if _, err := f.Seek(int64(corr%copies)*int64(len(frame)-8), io.SeekStart); err != nil {
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
	// The reader's own CPU (its locked thread's, the kernel's copy into it included) is
	// the figure that matters on a shared machine, where wall time is the neighbours'.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
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
	b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// threadCPU is the calling thread's user+system time, in nanoseconds.
func threadCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// FuzzReadFetch: any bytes give counts or an error, never a panic, a hang or a read
// past the frame.
func FuzzReadFetch(f *testing.F) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = rawMaxFetchVersion
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = AppendRecordBatch(nil, 2, []byte("x"), 0)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	f.Add(int16(rawMaxFetchVersion), fetchFrame(resp, 1))
	resp.Version = 4
	f.Add(int16(4), fetchFrame(resp, 1))
	f.Fuzz(func(t *testing.T, v int16, frame []byte) {
		v = 4 + (v&0x7fff)%(rawMaxFetchVersion-3)
		rd := bytes.NewReader(frame)
		rc := &rawConn{br: bufio.NewReaderSize(rd, 64)}
		var bytes int64
		_, err := rc.readFetch(kmsg.NewPtrFetchResponse(), v, 1, func(p fetchedPartition) { bytes += p.bytes })
		if err == nil && len(frame) >= 4 {
			size := int64(binary.BigEndian.Uint32(frame))
			if read := int64(len(frame)) - int64(rd.Len()) - int64(rc.br.Buffered()); read != 4+size {
				t.Fatalf("read %d bytes of a frame of %d", read, 4+size)
			}
			if bytes > size {
				t.Fatalf("counted %d record bytes in a frame of %d", bytes, size)
			}
		}
	})
}

// TestRawFetchSession: the raw fetcher opens a KIP-227 session with a full request,
// then names only the partitions whose offset moved (and forgets those done), and
// opens a new session when the broker has lost it.
func TestRawFetchSession(t *testing.T) {
	const v = rawMaxFetchVersion
	client, server := net.Pipe()
	defer server.Close()
	type seen struct {
		id, epoch int32
		parts     map[int32]int64 // partition: fetch offset
		forgotten []int32
	}
	reqs := make(chan seen, 16)
	batch := func(base int64) []byte {
		b := AppendRecordBatch(nil, 2, []byte("x"), 0)
		binary.BigEndian.PutUint64(b, uint64(base))
		return b
	}
	// The broker's script: answer i to request i.
	script := []func(*kmsg.FetchResponse){
		func(r *kmsg.FetchResponse) { r.SessionID = 9; addPart(r, "t", 1, batch(0)) },              // opened: p1 has 2 records
		func(r *kmsg.FetchResponse) { addPart(r, "t", 1, batch(2)); addPart(r, "t", 2, batch(0)) }, // incremental: p1 again, p2
		func(r *kmsg.FetchResponse) { r.ErrorCode = kerr.FetchSessionIDNotFound.Code },             // evicted
		func(r *kmsg.FetchResponse) { r.SessionID = 11; addPart(r, "t", 0, batch(0)) },             // reopened: p0; all done
	}
	go func() {
		br := bufio.NewReader(server)
		for i, answer := range script {
			req, corr, err := readFetchRequest(br, v)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			s := seen{id: req.SessionID, epoch: req.SessionEpoch, parts: map[int32]int64{}}
			for _, rt := range req.Topics {
				for _, p := range rt.Partitions {
					s.parts[p.Partition] = p.FetchOffset
				}
			}
			for _, f := range req.ForgottenTopics {
				s.forgotten = append(s.forgotten, f.Partitions...)
			}
			reqs <- s
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			answer(resp)
			if _, err := server.Write(fetchFrame(resp, corr)); err != nil {
				t.Errorf("answer %d: %v", i, err)
				return
			}
		}
	}()
	rc := &rawConn{c: client, br: bufio.NewReader(client), fmt: kmsg.NewRequestFormatter()}
	st := &rawStats{lat: newRecorder()}
	until := map[int32]int64{0: 2, 1: 4, 2: 2}
	if err := rawFetch(context.Background(), rc, "t", []int32{0, 1, 2}, nil, until, v, 1, st); err != nil {
		t.Fatal(err)
	}
	close(reqs)
	var got []seen
	for s := range reqs {
		got = append(got, s)
	}
	want := []seen{
		{0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}, nil}, // open: every partition
		{9, 1, map[int32]int64{1: 2}, nil},             // p1 moved, not done
		{9, 2, map[int32]int64{}, []int32{1, 2}},       // p1 and p2 done: forgotten
		{0, 0, map[int32]int64{0: 0}, nil},             // reopened with what is left
	}
	if len(got) != len(want) {
		t.Fatalf("%d requests %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.id != w.id || g.epoch != w.epoch || !maps.Equal(g.parts, w.parts) || !slices.Equal(g.forgotten, w.forgotten) {
			t.Errorf("request %d: %+v, want %+v", i, g, w)
		}
	}
	if n := st.records.Load(); n != 8 || st.errs.Load() != 0 {
		t.Errorf("%d records, %d errors; want 8, 0", n, st.errs.Load())
	}
}

func addPart(r *kmsg.FetchResponse, topic string, p int32, recs []byte) {
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.HighWatermark, rp.LastStableOffset = p, 4, 4
	rp.RecordBatches = recs
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
}

// readFetchRequest reads one Fetch request frame as a broker would.
func readFetchRequest(br *bufio.Reader, v int16) (*kmsg.FetchRequest, int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return nil, 0, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(br, frame); err != nil {
		return nil, 0, err
	}
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body := frame[10+max(idLen, 0):]
	if v >= 12 {
		body = body[1:] // the header's empty tag buffer
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	return req, corr, req.ReadFrom(body)
}
