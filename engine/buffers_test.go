package engine

import (
	"bytes"
	"testing"
)

// Buffers read as the concatenation of their slices: every range of it
// sliced (Slice) and copied (CopyAt) is that range of the joined bytes.
func TestBuffers(t *testing.T) {
	v := BuffersOf([]byte("abc"), []byte("d"), []byte("efgh"))
	all := []byte("abcdefgh")
	if v.Len() != len(all) || !bytes.Equal(v.Bytes(), all) {
		t.Fatalf("Len %d, Bytes %q", v.Len(), v.Bytes())
	}
	for from := 0; from <= len(all); from++ {
		for to := from; to <= len(all); to++ {
			s := v.Slice(from, to)
			for _, p := range s.Bufs {
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

// countedRef counts the references to memory lent to a Buffers.
type countedRef struct{ refs int }

func (r *countedRef) Retain()  { r.refs++ }
func (r *countedRef) Release() { r.refs-- }

// A Buffers holds one reference to each lender: a slice of it holds them
// all (its parent given up), Retain takes one more of each for a second
// holder, and Release gives a holder's back once, emptying it.
func TestBuffersReferences(t *testing.T) {
	a, b := &countedRef{refs: 1}, &countedRef{refs: 1}
	var v Buffers
	v.Append([]byte("abc"))
	v.Hold(a)
	v.Append(nil)
	v.Append([]byte("def"))
	v.Hold(b)
	if len(v.Bufs) != 2 || v.Len() != 6 {
		t.Fatalf("%d slices, %d bytes: want 2 and 6 (nothing empty appended)", len(v.Bufs), v.Len())
	}
	s := v.Slice(1, 2) // within a's slice: holds b's reference too
	w := s.Retain()
	if a.refs != 2 || b.refs != 2 || string(w.Bytes()) != "b" {
		t.Fatalf("retained: references %d and %d, want 2 each; bytes %q", a.refs, b.refs, w.Bytes())
	}
	s.Release()
	s.Release() // emptied: nothing more
	if a.refs != 1 || b.refs != 1 || s.Len() != 0 {
		t.Fatalf("one holder released: references %d and %d, want 1 each; %d bytes left", a.refs, b.refs, s.Len())
	}
	w.Release()
	if a.refs != 0 || b.refs != 0 {
		t.Fatalf("both released: references %d and %d", a.refs, b.refs)
	}
	if n := BuffersOf([]byte("x")); n.Retain().Len() != 1 {
		t.Fatal("Retain of buffers lent by no one")
	}
}
