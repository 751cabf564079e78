package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The precomputed table answers exactly as kmsg does, for every key and version
// (including versions past the newest, where the request is refused later), and
// unknown keys are never flexible.
func TestIsFlexibleMatchesKmsg(t *testing.T) {
	for key := int16(-1); key <= kmsg.MaxKey+2; key++ {
		r := kmsg.RequestForKey(key)
		for v := int16(-1); v <= 30; v++ {
			want := false
			if r != nil && v >= 0 {
				r.SetVersion(v)
				want = r.IsFlexible()
			}
			if got := IsFlexible(key, v); got != want {
				t.Errorf("IsFlexible(%d, %d) = %v, kmsg says %v", key, v, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { IsFlexible(0, 9) }); n != 0 {
		t.Errorf("isFlexible allocates %.1f times per call", n)
	}
}
