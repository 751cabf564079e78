package engine

import (
	"bytes"
	"testing"
)

// Buffers read as the concatenation of their slices: every range of it
// sliced (Slice) and copied (CopyAt) is that range of the joined bytes.
func TestBuffers(t *testing.T) {
	v := Buffers{[]byte("abc"), []byte("d"), []byte("efgh")}
	all := []byte("abcdefgh")
	if v.Len() != len(all) || !bytes.Equal(v.Bytes(), all) {
		t.Fatalf("Len %d, Bytes %q", v.Len(), v.Bytes())
	}
	for from := 0; from <= len(all); from++ {
		for to := from; to <= len(all); to++ {
			s := v.Slice(from, to)
			for _, p := range s {
				if len(p) == 0 {
					t.Fatalf("Slice(%d, %d) = %q: an empty slice", from, to, s)
				}
			}
			if got := s.Bytes(); !bytes.Equal(got, all[from:to]) {
				t.Fatalf("Slice(%d, %d) = %q, want %q", from, to, got, all[from:to])
			}
			dst := make([]byte, to-from)
			if n := v.CopyAt(dst, from); n != to-from || !bytes.Equal(dst, all[from:to]) {
				t.Fatalf("CopyAt(%d) of %d bytes: %d, %q", from, to-from, n, dst)
			}
		}
	}
	if n := v.CopyAt(make([]byte, 4), 6); n != 2 {
		t.Fatalf("CopyAt past the end copied %d bytes, want 2", n)
	}
	if b := (Buffers{}).Bytes(); b != nil {
		t.Fatalf("Bytes of none: %q", b)
	}
}
