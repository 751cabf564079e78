package engine

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors. Callers test them with errors.Is; the net layer maps them to
// Kafka error codes.
var (
	// ErrCorrupt is the class of all on-disk and wire corruption.
	ErrCorrupt = errors.New("engine: corrupt data")
	// ErrCorruptBatch is a record batch whose framing or CRC is wrong. It wraps
	// ErrCorrupt (Kafka: CORRUPT_MESSAGE).
	ErrCorruptBatch error = corruptError("engine: corrupt record batch")
	// ErrUnsupportedMagic is a batch whose magic byte is not 2
	// (Kafka: UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedMagic = errors.New("engine: unsupported record batch magic")
	// ErrBatchTooLarge is a batch larger than max.message.bytes or one that
	// cannot fit a segment (Kafka: MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE).
	ErrBatchTooLarge = errors.New("engine: record batch too large")
	// ErrInvalidRecord is a well-framed batch whose content is inconsistent,
	// e.g. a record count that disagrees with the offsets (Kafka: INVALID_RECORD).
	ErrInvalidRecord = errors.New("engine: invalid record")
	// ErrOutOfOrderSequence is an idempotent batch whose sequence number leaves
	// a gap (Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("engine: out of order sequence number")
	// ErrInvalidProducerEpoch is a batch from a fenced producer epoch
	// (Kafka: INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("engine: invalid producer epoch")
	// ErrInvalidTxnState is a batch the producer's transaction state does
	// not allow: a non-transactional batch from a producer with a
	// transaction open, or a transactional one opening a transaction the
	// coordinator did not verify (Kafka: INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("engine: invalid transaction state")
	// ErrTransactionCoordinatorFenced is a transaction marker from an older
	// coordinator epoch than the partition's last marker of that producer
	// (Kafka: TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("engine: transaction coordinator fenced")
	// ErrOffsetOutOfRange is a read or a request below the log start offset or
	// above the log end offset (Kafka: OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("engine: offset out of range")
	// ErrUnexpectedAppendOffset is a follower append whose offsets do not
	// follow the log end offset.
	ErrUnexpectedAppendOffset = errors.New("engine: unexpected append offset")
	// ErrClosed is any operation on a closed log or manager.
	ErrClosed = errors.New("engine: closed")
	// ErrLogExists and ErrNoLog are returned by the Manager's log table.
	ErrNoLog = errors.New("engine: no such log")
	// ErrInvalidConfig is a configuration value the engine cannot honour.
	ErrInvalidConfig = errors.New("engine: invalid configuration")
	// ErrIO is the class of storage failures: a read, write or sync of a
	// log directory's files failed (Kafka: KAFKA_STORAGE_ERROR). The OS
	// error stays in the chain (errors.Is(err, syscall.EIO) holds).
	ErrIO error = ioError("engine: storage I/O error")
	// ErrNoSpace is a write that found the file system full. It wraps ErrIO.
	// The append that hit it was undone: the log takes appends again once
	// space is freed.
	ErrNoSpace error = ioError("engine: no space left on device")
	// ErrLogDirOffline is an operation on a log directory that failed I/O in
	// a way the engine cannot undo (a failed fdatasync, a failed rollback of
	// a partial write). The directory stays offline until the Manager is
	// reopened. It wraps ErrIO.
	ErrLogDirOffline error = ioError("engine: log directory offline")
)

// corruptError is a sentinel that also matches ErrCorrupt.
type corruptError string

func (e corruptError) Error() string        { return string(e) }
func (e corruptError) Is(target error) bool { return target == ErrCorrupt }

// ioError is a sentinel that also matches ErrIO.
type ioError string

func (e ioError) Error() string { return string(e) }
func (e ioError) Is(target error) bool {
	t, ok := target.(ioError)
	return ok && t == "engine: storage I/O error"
}

// ioFailure wraps an OS error of the data path in ErrNoSpace (ENOSPC) or
// ErrIO (anything else), keeping err in the chain. Errors already of an
// engine class are only annotated.
func ioFailure(what string, err error) error {
	switch {
	case errors.Is(err, ErrIO), errors.Is(err, ErrCorrupt), errors.Is(err, ErrClosed):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%s: %w: %w", what, ErrNoSpace, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrIO, err)
}
