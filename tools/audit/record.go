package audit

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// A canary record's value is one line of text, so that any console consumer shows it:
//
//	samsa-audit/1 <run> <producer> <seq> <sent>
//	samsa-audit/1 5f3a9c1e i 17 1765100000123456789
//
// run is the audit run's id (hex): records of other runs in the same topic are not
// judged; producer is i (the idempotent producer) or t (the transactional one); seq
// is the record's number in that producer's stream to its partition (1, 2, 3, ...);
// sent is the wall clock when it was handed to the client, Unix ns. The partition is
// where the record is read: a record's identity is (producer, partition, seq). The
// key is empty.

const valuePrefix = "samsa-audit/1 "

// ErrNotCanary is returned by DecodeValue for a value that is not a canary record.
var ErrNotCanary = errors.New("audit: not a canary record")

// Value is a decoded canary record.
type Value struct {
	Run      string
	Producer Producer
	Seq      int64
	Sent     int64 // Unix ns
}

// AppendValue appends the encoding of v to dst and returns the extended slice.
func AppendValue(dst []byte, v Value) []byte {
	dst = append(dst, valuePrefix...)
	dst = append(dst, v.Run...)
	dst = append(dst, ' ', v.Producer.code(), ' ')
	dst = strconv.AppendInt(dst, v.Seq, 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, v.Sent, 10)
}

// DecodeValue parses a canary record's value. It allocates only the run id.
func DecodeValue(b []byte) (Value, error) {
	rest, ok := bytes.CutPrefix(b, []byte(valuePrefix))
	if !ok {
		return Value{}, ErrNotCanary
	}
	var f [4][]byte
	for i := range f {
		if i < len(f)-1 {
			j := bytes.IndexByte(rest, ' ')
			if j <= 0 {
				return Value{}, fmt.Errorf("%w: %d fields", ErrNotCanary, i+1)
			}
			f[i], rest = rest[:j], rest[j+1:]
			continue
		}
		f[i] = rest
	}
	var v Value
	if len(f[0]) == 0 || len(f[0]) > 32 {
		return Value{}, fmt.Errorf("%w: run id %q", ErrNotCanary, f[0])
	}
	v.Run = string(f[0])
	if len(f[1]) != 1 {
		return Value{}, fmt.Errorf("%w: producer %q", ErrNotCanary, f[1])
	}
	switch f[1][0] {
	case 'i':
		v.Producer = Idempotent
	case 't':
		v.Producer = Transactional
	default:
		return Value{}, fmt.Errorf("%w: producer %q", ErrNotCanary, f[1])
	}
	var err error
	if v.Seq, err = strconv.ParseInt(string(f[2]), 10, 64); err != nil || v.Seq < 1 {
		return Value{}, fmt.Errorf("%w: seq %q", ErrNotCanary, f[2])
	}
	if v.Sent, err = strconv.ParseInt(string(f[3]), 10, 64); err != nil {
		return Value{}, fmt.Errorf("%w: send time %q", ErrNotCanary, f[3])
	}
	return v, nil
}
