package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors; check with errors.Is.
var (
	// ErrUnsupported: Handle was given a request type the controller does not serve.
	ErrUnsupported = errors.New("controller: unsupported request")
	// ErrClosed: the controller, lifecycle or follower was closed.
	ErrClosed = errors.New("controller: closed")
	// ErrSnapshotNeeded: a MetadataSource was asked for an offset that is compacted
	// away; read its Snapshot and fetch on from the snapshot's offset + 1.
	ErrSnapshotNeeded = errors.New("controller: metadata offset compacted: read the snapshot")
	// ErrNoController: a ControllerChannel found no active controller before its
	// context ended.
	ErrNoController = errors.New("controller: no active controller reachable")
	// ErrOutOfOrder: a MetadataFollower was given entries that do not follow its
	// offset.
	ErrOutOfOrder = errors.New("controller: metadata entries out of order")
)

// apiError is a Kafka error with the message a response carries (the pure functions
// of this package return them; the handlers copy code and message into responses).
type apiError struct {
	code *kerr.Error
	msg  string
}

func (e *apiError) Error() string { return e.code.Message + ": " + e.msg }
func (e *apiError) Unwrap() error { return e.code }

func errf(code *kerr.Error, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errCode returns the Kafka error code of err (0 for nil; UNKNOWN_SERVER_ERROR for an
// error that carries none).
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errMsg returns the message of err for a response (nil for nil).
func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return &ae.msg
	}
	s := err.Error()
	return &s
}
