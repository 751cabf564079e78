package sharesession

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/coordinator/share"
)

// TestSessionEpochs opens a session, moves it on, refuses a stale epoch, forgets a
// partition and closes it, as ShareFetch drives it.
func TestSessionEpochs(t *testing.T) {
	c := NewCache(10)
	k := Key{Group: "g", Member: "m"}
	p0 := share.Key{Group: "g", Partition: 0}
	p1 := share.Key{Group: "g", Partition: 1}
	now := time.Now()
	if _, replaced, code := c.Open(k, nil, []share.Key{p0, p0}, now); code != 0 || replaced != nil {
		t.Fatalf("open: %d %v", code, replaced)
	}
	parts, removed, code := c.Next(k, 1, []share.Key{p1}, nil, now)
	if code != 0 || len(parts) != 2 || removed != nil {
		t.Fatalf("epoch 1: %d %v %v, want p0 and p1", code, parts, removed)
	}
	if _, _, code := c.Next(k, 1, nil, nil, now); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("stale epoch: %d, want INVALID_SHARE_SESSION_EPOCH", code)
	}
	parts, removed, code = c.Next(k, 2, nil, []share.Key{p0}, now)
	if code != 0 || len(parts) != 1 || parts[0] != p1 || len(removed) != 1 || removed[0] != p0 {
		t.Fatalf("forget p0: %d %v %v", code, parts, removed)
	}
	if u := c.Unused([]share.Key{p0, p1}); len(u) != 1 || u[0] != p0 {
		t.Fatalf("unused: %v, want p0", u)
	}
	if code := c.Check(k, 3, now); code != 0 {
		t.Fatalf("check epoch 3: %d", code)
	}
	if parts, code := c.Close(k); code != 0 || len(parts) != 1 {
		t.Fatalf("close: %d %v", code, parts)
	}
	if _, code := c.Close(k); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("close again: %d, want SHARE_SESSION_NOT_FOUND", code)
	}
	if e := nextEpoch(1<<31 - 1); e != 1 {
		t.Fatalf("epoch after the largest: %d, want 1", e)
	}
}

// TestSessionLimit refuses a session beyond the limit while the others are in use,
// and evicts the least recently used one once it has been idle.
func TestSessionLimit(t *testing.T) {
	c := NewCache(2)
	now := time.Now()
	c.Open(Key{"g", "a"}, nil, nil, now)
	c.Open(Key{"g", "b"}, nil, nil, now.Add(time.Second))
	if _, _, code := c.Open(Key{"g", "c"}, nil, nil, now.Add(2*time.Second)); code != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("third session: %d, want SHARE_SESSION_LIMIT_REACHED", code)
	}
	later := now.Add(idle + 2*time.Second)
	if _, _, code := c.Open(Key{"g", "c"}, nil, nil, later); code != 0 {
		t.Fatalf("third session after idle: %d", code)
	}
	if _, code := c.Close(Key{"g", "a"}); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("the least recently used session was not evicted: %d", code)
	}
}
