package kafka

import (
	"reflect"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors per API and code (samsa_request_errors_total), as Kafka's
// RequestMetrics ErrorsPerSec count them: every ErrorCode field of an answer, at any
// depth (top level, per topic, per partition, per group, per resource), counts once.
// Kafka counts NONE too; here it is left out, so that an idle series set stays
// small and the hot path does no label lookups for a successful answer.
//
// kmsg's responses have no error-count method, so the fields are found by
// reflection, once per response type: errorWalker compiles a type into a walk over
// exactly the fields that lead to an ErrorCode, and a type without any costs one
// map lookup per answer. Fetch, whose answer is framed by hand, counts its own
// (01_fetch.go).

// countErrors adds resp's error codes to the API's series.
func (a *apiMetrics) countErrors(resp kmsg.Response) {
	w := walkerFor(reflect.TypeOf(resp))
	if w == nil {
		return
	}
	w(reflect.ValueOf(resp), a)
}

// countError adds one answer's code to the API's series; NONE is not counted.
func (a *apiMetrics) countError(code int16) {
	if code == 0 {
		return
	}
	a.errors.WithLabelValues(a.name, errorName(code)).Inc()
}

// errorName is Kafka's name of code (UNKNOWN_TOPIC_OR_PARTITION, ...), or the
// number for a code kerr does not know.
func errorName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}

// An errWalk hands every error code under v to f.
type errWalk func(v reflect.Value, f errSink)

// errSink takes the codes an errWalk finds (*apiMetrics; an interface so that the
// walk allocates no closure).
type errSink interface{ countError(code int16) }

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
		return func(v reflect.Value, f errSink) {
			if !v.IsNil() {
				elem(v.Elem(), f)
			}
		}
	case reflect.Slice:
		elem := errorWalker(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v reflect.Value, f errSink) {
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
		return func(v reflect.Value, f errSink) {
			for _, fd := range fields {
				if fd.walk == nil {
					f.countError(int16(v.Field(fd.i).Int()))
				} else {
					fd.walk(v.Field(fd.i), f)
				}
			}
		}
	}
	return nil
}
