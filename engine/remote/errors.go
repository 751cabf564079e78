package remote

import (
	"context"
	"errors"
	"fmt"
)

// The kinds of failure a caller tells apart, after Kafka's exceptions. Every
// error of an object-store call is a *StorageError, which is
// ErrRemoteStorage and one of the kinds below (errors.Is).
var (
	// ErrRemoteStorage is Kafka's RemoteStorageException: any failure of
	// the object store.
	ErrRemoteStorage = errors.New("remote storage error")
	// ErrRemoteResourceNotFound is Kafka's RemoteResourceNotFoundException:
	// the object of a segment or index is not in the bucket (deleted, or
	// never copied; a segment without a transaction index has none).
	ErrRemoteResourceNotFound = errors.New("remote resource not found")
	// ErrBucketNotFound: the configured bucket does not exist.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrAccessDenied: the credentials are wrong or lack the permission.
	ErrAccessDenied = errors.New("access denied")
	// ErrTimeout: the store did not answer, or stopped sending a body, within
	// the configured timeouts. Retriable.
	ErrTimeout = errors.New("remote storage timed out")
)

// StorageError describes a failed object-store call.
type StorageError struct {
	Op     string // "copy", "fetch", "fetch index", "delete"
	Bucket string
	Key    string
	Kind   error  // ErrRemoteStorage or one of the kinds above
	Code   string // the S3 error code ("NoSuchKey", "AccessDenied"), if the store answered one
	Err    error  // the client's error
}

func (e *StorageError) Error() string {
	s := fmt.Sprintf("remote: %s s3://%s/%s: %v", e.Op, e.Bucket, e.Key, e.Kind)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap makes a StorageError match ErrRemoteStorage, its kind and the
// client's error.
func (e *StorageError) Unwrap() []error {
	errs := []error{ErrRemoteStorage}
	if e.Kind != ErrRemoteStorage {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// kindOfCode maps an S3 error code to a kind.
func kindOfCode(code string) error {
	switch code {
	case "NoSuchKey", "NotFound":
		return ErrRemoteResourceNotFound
	case "NoSuchBucket":
		return ErrBucketNotFound
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "AllAccessDisabled",
		"XAdminUserNotFound": // versitygw's answer to an access key it does not know
		return ErrAccessDenied
	case "RequestTimeout", "SlowDown", "ServiceUnavailable":
		return ErrTimeout
	}
	return ErrRemoteStorage
}

// storeError wraps a client's error: code is the S3 error code it carried
// ("" if none); timedOut says the call's own deadline fired.
func storeError(op, bucket, key, code string, timedOut bool, err error) error {
	kind := kindOfCode(code)
	if kind == ErrRemoteStorage && (timedOut || errors.Is(err, context.DeadlineExceeded)) {
		kind = ErrTimeout
	}
	return &StorageError{Op: op, Bucket: bucket, Key: key, Kind: kind, Code: code, Err: err}
}
