package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrMalformedHeader is a request header that does not parse. It never reaches a
// client as a code: such a request gets its connection closed.
var ErrMalformedHeader = errors.New("kafka: malformed request header")

// Header is a parsed request header.
//
//	v0: api_key int16 | api_version int16 | correlation_id int32
//	v1: v0 | client_id nullable_string (int16 length, -1 = null)
//	v2: v1 | tagged_fields (uvarint count, then {uvarint tag, uvarint size, bytes})
//
// Flexible (KIP-482) versions of an API use header v2; ControlledShutdown v0 uses v0;
// everything else v1.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string // empty when null
	// Flexible is whether the request's version is flexible; the response header is then
	// v1 (correlation id + tagged fields), except ApiVersions, whose response header is
	// always v0.
	Flexible bool
}

// ParseFixedHeader reads the fields every header version has.
func ParseFixedHeader(frame []byte) (Header, error) {
	if len(frame) < 8 {
		return Header{}, fmt.Errorf("%w: %d bytes", ErrMalformedHeader, len(frame))
	}
	return Header{
		Key:           int16(binary.BigEndian.Uint16(frame[0:])),
		Version:       int16(binary.BigEndian.Uint16(frame[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}, nil
}

// ParseHeaderRest parses the header after the fixed part, given whether the request's
// version is flexible, and returns the body that follows it.
func ParseHeaderRest(h *Header, frame []byte, flexible bool) ([]byte, error) {
	b := frame[8:]
	h.Flexible = flexible
	if h.Key == 7 && h.Version == 0 { // ControlledShutdown v0: header v0
		return b, nil
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: no client id", ErrMalformedHeader)
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case n == -1:
	case n < 0 || int(n) > len(b):
		return nil, fmt.Errorf("%w: client id length %d", ErrMalformedHeader, n)
	default:
		h.ClientID = string(b[:n])
		b = b[n:]
	}
	if !flexible {
		return b, nil
	}
	return skipTags(b)
}

// skipTags skips a tagged-field section, bounds-checked.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tag count", ErrMalformedHeader)
	}
	b = b[n:]
	for range count {
		_, n := binary.Uvarint(b) // tag
		if n <= 0 {
			return nil, fmt.Errorf("%w: tag", ErrMalformedHeader)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: tag size", ErrMalformedHeader)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// flexibleFrom holds, for each API key kmsg knows, the first flexible version of its
// requests (-1: none). Built once, so the request path asks kmsg nothing.
var flexibleFrom = func() [kmsg.MaxKey + 1]int16 {
	var t [kmsg.MaxKey + 1]int16
	for key := range t {
		t[key] = -1
		r := kmsg.RequestForKey(int16(key))
		if r == nil {
			continue
		}
		for v := int16(0); v <= r.MaxVersion(); v++ {
			r.SetVersion(v)
			if r.IsFlexible() {
				t[key] = v
				break
			}
		}
	}
	return t
}()

// IsFlexible reports whether version v of API key is flexible, per kmsg.
func IsFlexible(key, v int16) bool {
	if key < 0 || int(key) >= len(flexibleFrom) {
		return false
	}
	from := flexibleFrom[key]
	return from >= 0 && v >= from
}

// AppendResponseHeader appends the response header for h to dst:
//
//	v0: correlation_id int32
//	v1: correlation_id int32 | tagged_fields (always 0 here: one byte)
func AppendResponseHeader(dst []byte, h *Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.Flexible && h.Key != 18 { // ApiVersions answers with header v0 always
		dst = append(dst, 0)
	}
	return dst
}
