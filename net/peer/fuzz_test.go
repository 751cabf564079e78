package peer

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// FuzzDecodeSamsaRaft: any body decodes to a message with a sender and a receiver or
// fails with ErrMalformedRaft; never a panic.
func FuzzDecodeSamsaRaft(f *testing.F) {
	b, _ := proto.Marshal(raftMsg(1, 2, 3))
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeSamsaRaft(b)
		if err == nil && (m.GetTo() == 0 || m.GetFrom() == 0) {
			t.Fatalf("accepted %v", m)
		}
	})
}

// FuzzDecodeMetadataEntries: entries decode consecutive from the fetch offset, each
// within the input and metadata.MaxEntrySize, or the input is refused; re-encoding
// what decoded gives back the input's prefix.
func FuzzDecodeMetadataEntries(f *testing.F) {
	frame := metadata.EncodeEntry(nil, &metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}})
	f.Add(AppendMetadataEntry(AppendMetadataEntry(nil, 4, frame), 5, nil), uint64(4))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}, uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, from uint64) {
		got, err := DecodeMetadataEntries(nil, b, from)
		var re []byte
		for i, e := range got {
			if e.Offset != from+uint64(i) || len(e.Data) > metadata.MaxEntrySize {
				t.Fatalf("entry %d: %d (%d bytes)", i, e.Offset, len(e.Data))
			}
			re = AppendMetadataEntry(re, e.Offset, e.Data)
		}
		if string(re) != string(b[:len(re)]) || (err == nil && len(re) != len(b)) {
			t.Fatalf("re-encoding differs (err %v)", err)
		}
	})
}
