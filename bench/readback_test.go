package bench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadBackBatchStamped: a read-back batch decodes as Kafka's v2 batch with a valid
// CRC after each stamp, every record keyed with its partition and sequence number,
// and a frame's batches are found and stamped in place.
func TestReadBackBatchStamped(t *testing.T) {
	value := []byte("a value of the backlog")
	b, keys := appendReadBackBatch([]byte{0xAA}, 7, 5, value, 1700000000000)
	b = b[1:]
	for _, seq0 := range []int64{0, 1234567, 9_999_999_999_995} {
		stampBatch(b, keys, seq0)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.NumRecords != 5 || int(rb.Length) != len(b)-12 {
			t.Fatalf("header %+v", rb)
		}
		if got := crc32.Checksum(b[21:], crc32c); int32(got) != rb.CRC {
			t.Fatalf("seq0 %d: crc %x, header says %x", seq0, got, uint32(rb.CRC))
		}
		recs := rb.Records
		for i := 0; i < 5; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			p, seq, ok := parseReadBackKey(r.Key)
			if int(r.OffsetDelta) != i || string(r.Value) != string(value) || !ok || p != 7 || seq != seq0+int64(i) {
				t.Fatalf("seq0 %d record %d: key %q (%d %d %v) %+v", seq0, i, r.Key, p, seq, ok, r)
			}
			_, n := binary.Varint(recs)
			recs = recs[n+int(r.Length):]
		}
		if len(recs) != 0 {
			t.Fatalf("%d trailing bytes", len(recs))
		}
	}

	// A frame of two partitions' batches: each stamped with its own partition's
	// sequence numbers, the acknowledgements kept by partition.
	req, _ := rawProduceRequest("t", []int32{0, 1}, 9, -1, 3, value)
	for i := range req.Topics[0].Partitions {
		rp := &req.Topics[0].Partitions[i]
		rp.Records, keys = appendReadBackBatch(nil, rp.Partition, 3, value, 0)
	}
	rc := &rawConn{fmt: kmsg.NewRequestFormatter()}
	frame := rc.appendRequest(nil, req, 1)
	l := newAckLedger()
	s, err := newReadBackStamp(l, frame, req, keys)
	if err != nil {
		t.Fatal(err)
	}
	l.claim([]int32{1}, 10, nil) // partition 1 starts at 10
	seqs := s.stamp(frame, nil)
	if fmt.Sprint(seqs) != "[0 10]" {
		t.Fatalf("seqs %v", seqs)
	}
	for i, p := range []int32{0, 1} {
		k := appendReadBackKey(nil, p, seqs[i]+2)
		if !strings.Contains(string(frame[s.at[i]:]), string(k)) {
			t.Errorf("partition %d: no key %s in its batch", p, k)
		}
	}
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	for i, p := range []int32{1, 0} {
		pp := kmsg.NewProduceResponseTopicPartition()
		pp.Partition, pp.BaseOffset = p, int64(100*i)
		rt.Partitions = append(rt.Partitions, pp)
	}
	resp.Topics = append(resp.Topics, rt)
	s.acked(resp, seqs)
	acked, n, err := l.acked(map[int32]int64{0: 3, 1: 3})
	if err == nil || !strings.Contains(err.Error(), "partition 0: a batch acknowledged at offset 100 where 0 was next") {
		t.Fatalf("acked %v %d %v", acked, n, err)
	}
}

// TestAckLedger: what was acknowledged must cover every partition's offsets from 0
// to its end once.
func TestAckLedger(t *testing.T) {
	l := newAckLedger()
	l.ack(0, ackedBatch{base: 3, seq0: 0, n: 3}) // the second request's answer came first
	l.ack(0, ackedBatch{base: 0, seq0: 3, n: 3})
	l.ack(1, ackedBatch{base: 0, seq0: 0, n: 3})
	acked, n, err := l.acked(map[int32]int64{0: 6, 1: 3})
	if err != nil || n != 9 || acked[0][0].seq0 != 3 || acked[0][1].base != 3 {
		t.Fatalf("%v %d %v", acked, n, err)
	}
	for _, c := range []struct {
		end  map[int32]int64
		want string
	}{
		{map[int32]int64{0: 7, 1: 3}, "partition 0: 6 records acknowledged, its end offset is 7"},
		{map[int32]int64{0: 6, 1: 3, 2: 5}, "partition 2: nothing acknowledged, its end offset is 5"},
	} {
		if _, _, err := l.acked(c.end); err == nil || err.Error() != c.want {
			t.Errorf("end %v: %v, want %q", c.end, err, c.want)
		}
	}
	l.ack(1, ackedBatch{base: 2, seq0: 9, n: 1}) // two batches over offset 2
	if _, _, err := l.acked(map[int32]int64{0: 6, 1: 4}); err == nil || !strings.Contains(err.Error(), "partition 1: a batch acknowledged at offset 2 where 3 was next") {
		t.Errorf("overlap: %v", err)
	}
}

// readBackStream is kcat's output for partitions 0 and 1 of the ledger below, read
// in order: partition 0's batches at offsets 0 (sequence 4..7) and 4 (0..3),
// partition 1's at 0 (0..2).
func readBackStream() []string {
	var out []string
	line := func(p int32, off, seq int64) {
		out = append(out, fmt.Sprintf("%d %d %s 8", p, off, appendReadBackKey(nil, p, seq)))
	}
	for o := int64(0); o < 8; o++ {
		line(0, o, (o+4)%8)
		if o < 3 {
			line(1, o, o)
		}
	}
	return out
}

func readBackLedger() map[int32][]ackedBatch {
	return map[int32][]ackedBatch{
		0: {{base: 0, seq0: 4, n: 4}, {base: 4, seq0: 0, n: 4}},
		1: {{base: 0, seq0: 0, n: 3}},
	}
}

// checkLines feeds lines of kcat's output to a check of readBackLedger and returns
// its verdict.
func checkLines(lines []string) (bool, string, int64) {
	c := newReadBackCheck(readBackLedger(), []byte("12345678"))
	sc := bufio.NewScanner(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	for sc.Scan() {
		r, err := parseKcatLine(sc.Bytes())
		if err != nil {
			c.fail("%v", err)
			continue
		}
		c.record(r)
	}
	ok, first := c.verdict()
	return ok, first, c.problems
}

// TestReadBackCheck: the checker passes the stream of every acknowledged record once
// and in order, and catches each way a read can go wrong, with the first
// discrepancy named.
func TestReadBackCheck(t *testing.T) {
	good := readBackStream()
	if ok, first, n := checkLines(good); !ok || first != "" || n != 0 {
		t.Fatalf("the whole stream: %v %q %d", ok, first, n)
	}
	edit := func(f func([]string) []string) []string { return f(append([]string(nil), good...)) }
	// good: 0 0, 1 0, 0 1, 1 1, 0 2, 1 2, 0 3, 0 4, 0 5, 0 6, 0 7
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"a gap", edit(func(l []string) []string { return append(l[:7], l[8:]...) }), "partition 0: offsets 4 to 4 missing (offset 5 read next)"},
		{"a duplicate", edit(func(l []string) []string { return append(l[:5], append([]string{l[2]}, l[5:]...)...) }), "partition 0: offset 1 read again after offset 2 (a duplicate, or out of order)"},
		{"out of order", edit(func(l []string) []string { l[7], l[8] = l[8], l[7]; return l }), "partition 0: offsets 4 to 4 missing (offset 5 read next)"},
		{"the end missing", edit(func(l []string) []string { return l[:len(l)-2] }), "partition 0: read to offset 6 of the 8 acknowledged (2 records missing at the end)"},
		{"a record not acknowledged", append(append([]string(nil), good...), "1 3 000001:0000000000003 8"), "partition 1: offset 3 read, past the acknowledged end 3 (a record not acknowledged)"},
		{"another record at an offset", edit(func(l []string) []string { l[0] = "0 0 000000:0000000000000 8"; return l }), `partition 0 offset 0: key "000000:0000000000000", the acknowledged record there is "000000:0000000000004"`},
		{"a record of another partition", edit(func(l []string) []string { l[1] = "1 0 000000:0000000000004 8"; return l }), `partition 1 offset 0: key "000000:0000000000004", the acknowledged record there is "000001:0000000000000"`},
		{"a value cut short", edit(func(l []string) []string { l[3] = "1 1 000001:0000000000001 7"; return l }), "partition 1 offset 1: a value of 7 bytes, 8 were sent"},
		{"a partition never produced to", append(append([]string(nil), good...), "2 0 000002:0000000000000 8"), "partition 2 offset 0: a partition nothing was acknowledged on"},
		{"a line that is not kcat's format", edit(func(l []string) []string { l[4] = "% ERROR: Local: Broker transport failure"; return l }), "not a line of kcat -f"},
	} {
		ok, first, n := checkLines(c.lines)
		if ok || n == 0 || !strings.Contains(first, c.want) {
			t.Errorf("%s: pass %v, %d discrepancies, first %q; want %q", c.name, ok, n, first, c.want)
		}
	}
	// The value itself, where the reader has it (franz-go).
	c := newReadBackCheck(readBackLedger(), []byte("12345678"))
	c.record(readRecord{partition: 1, offset: 0, key: appendReadBackKey(nil, 1, 0), valueLen: 8, value: []byte("12345679")})
	if c.done() || c.first != "partition 1 offset 0: the value differs from what was sent" {
		t.Errorf("a changed value: %q", c.first)
	}
}

// TestReadBackVerdictFails: a read-back that failed is a problem of the report (the
// exit code of samsa-bench run) with its first discrepancy, and its verdict line
// says FAIL.
func TestReadBackVerdictFails(t *testing.T) {
	fig := &TieredFigures{ReadBack: []ReadBackFigures{
		{Reader: "franz-go", Pass: true, DrainFigures: DrainFigures{Records: 11, Sec: 1, Rate: 11}},
		{Reader: "kcat", Pass: false, Discrepancies: 1, First: "partition 0: offsets 4 to 4 missing (offset 5 read next)", DrainFigures: DrainFigures{Records: 10}},
	}}
	rep := &Report{Results: []*Result{{Target: "samsa", Mode: "raw", Round: 1, Tiered: fig}}}
	probs := rep.Problems()
	if fig.ReadBackPassed() || len(probs) != 1 || !strings.Contains(probs[0], "read-back kcat: FAIL: partition 0: offsets 4 to 4 missing") {
		t.Fatalf("problems %q", probs)
	}
	if v := fig.ReadBack[0].verdict(); !strings.HasPrefix(v, "read-back franz-go: PASS: every acknowledged record once and in order, 11 records") {
		t.Errorf("verdict %q", v)
	}
	lines := rep.verdictLines()
	if last := lines[len(lines)-1]; last != "verdict: FAIL (1 problem(s) above)" || !strings.Contains(lines[0], "read-back franz-go PASS") || !strings.Contains(lines[0], "read-back kcat FAIL") {
		t.Errorf("verdict lines %q", lines)
	}
}
