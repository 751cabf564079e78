package chaos

import (
	"bytes"
	"testing"
	"time"
)

// FuzzCheckHistory: any bytes either fail to decode with ErrHistory or decode into a
// history the checker judges without panicking, in bounded time.
func FuzzCheckHistory(f *testing.F) {
	f.Add([]byte(`{"header":{"version":1,"topic":"t","partitions":2,"seed":3}}
{"id":1,"proc":"p0","f":"send","st":"ok","s":1,"e":2,"seq":1,"p":0,"o":0,"v":"p0-1"}
{"id":2,"proc":"a0","f":"poll","st":"ok","s":1,"e":3,"recs":[[0,0,"p0-1"],[0,1,"x"]]}
{"id":3,"proc":"g0","f":"commit","st":"ok","g":"g","offs":{"0":1},"s":3,"e":4}
{"id":4,"proc":"g0","f":"assign","st":"ok","g":"g","parts":[0,1],"s":5,"e":5}
{"id":5,"proc":"nemesis","f":"fault","st":"ok","s":1,"e":9,"fault":{"kind":"kill","nodes":[1]}}
{"id":6,"proc":"final","f":"event","st":"ok","v":"end-offsets","offs":{"0":2}}
{"id":7,"proc":"final","f":"poll","st":"ok","s":10,"e":11,"recs":[[0,0,"p0-1"]]}
`))
	f.Add([]byte(`{"header":{"version":1}}
{"id":1,"proc":"p0","f":"send","st":"ok","o":9223372036854775807,"v":"a"}
{"id":2,"proc":"a0","f":"poll","st":"ok","recs":[[0,-5,"a"],[0,9223372036854775807,"a"]]}
`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHistory(bytes.NewReader(b))
		if err != nil {
			return
		}
		res := Check(h, Options{Linear: LinearOptions{Windows: 2, Width: 8, Timeout: 100 * time.Millisecond}})
		if res.Valid != (res.Total() == 0) {
			t.Fatalf("valid %v with %d anomalies", res.Valid, res.Total())
		}
	})
}
