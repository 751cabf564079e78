package wire

import (
	"reflect"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The error codes of an answer, for the request metrics (net/kafka's
// samsa_request_errors_total, as Kafka's RequestMetrics ErrorsPerSec count them):
// every ErrorCode field of an answer, at any depth (top level, per topic, per
// partition, per group, per resource).
//
// kmsg's responses have no error-count method, so the fields are found by
// reflection, once per response type: errorWalker compiles a type into a walk over
// exactly the fields that lead to an ErrorCode, and a type without any costs one
// map lookup per answer.

// ErrorCodes hands every ErrorCode field of resp, at any depth, to sink.
func ErrorCodes(resp kmsg.Response, sink ErrorSink) {
	w := walkerFor(reflect.TypeOf(resp))
	if w == nil {
		return
	}
	w(reflect.ValueOf(resp), sink)
}

// HasErrorCodes reports whether answers of resp's type carry any ErrorCode field.
func HasErrorCodes(resp kmsg.Response) bool { return walkerFor(reflect.TypeOf(resp)) != nil }

// ErrorName is Kafka's name of code (UNKNOWN_TOPIC_OR_PARTITION, ...), or the
// number for a code kerr does not know.
func ErrorName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}

// An errWalk hands every error code under v to f.
type errWalk func(v reflect.Value, f ErrorSink)

// ErrorSink takes the codes ErrorCodes finds (an interface so that the walk allocates
// no closure).
type ErrorSink interface{ CountError(code int16) }

// walkers caches errorWalker per type; a nil walk (no ErrorCode below) is cached
// as a typed nil.
var walkers sync.Map // reflect.Type -> errWalk

func walkerFor(t reflect.Type) errWalk {
	if w, ok := walkers.Load(t); ok {
		return w.(errWalk)
	}
	w := errorWalker(t, map[reflect.Type]bool{})
	walkers.Store(t, w)
	return w
}

// errorWalker compiles the walk for t; nil when no ErrorCode is reachable from it.
// seen breaks recursive types (kmsg has none today).
func errorWalker(t reflect.Type, seen map[reflect.Type]bool) errWalk {
	if seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.Pointer:
		elem := errorWalker(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value, f ErrorSink) {
			if !v.IsNil() {
				elem(v.Elem(), f)
			}
		}
	case reflect.Slice:
		elem := errorWalker(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value, f ErrorSink) {
			for i := range v.Len() {
				elem(v.Index(i), f)
			}
		}
	case reflect.Struct:
		type field struct {
			i    int
			walk errWalk // nil for the ErrorCode field itself
		}
		var fields []field
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Name == "ErrorCode" && sf.Type.Kind() == reflect.Int16 {
				fields = append(fields, field{i: i})
				continue
			}
			if w := errorWalker(sf.Type, seen); w != nil {
				fields = append(fields, field{i: i, walk: w})
			}
		}
		if len(fields) == 0 {
			return nil
		}
		return func(v reflect.Value, f ErrorSink) {
			for _, fd := range fields {
				if fd.walk == nil {
					f.CountError(int16(v.Field(fd.i).Int()))
				} else {
					fd.walk(v.Field(fd.i), f)
				}
			}
		}
	}
	return nil
}
