package engine

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrTooManyOpenFiles is returned (wrapped, with the limit and what the logs
// hold) when a log cannot be opened or created because the process reached its
// open-file limit (EMFILE) or the system its (ENFILE).
var ErrTooManyOpenFiles = errors.New("engine: too many open files")

// FileReserve is the headroom of descriptors a broker keeps beside its logs'
// files, for client and replication connections, the metadata log and the
// checkpoint files: Open warns when the logs leave less than this under the
// limit.
const FileReserve = 512

// createReserve is the descriptors CreateLog leaves free under the limit,
// counting a file per log (a lower bound: a log holds one per segment): a
// process at its limit could not even close its logs cleanly (trimming an
// index opens its file), nor accept a connection.
const createReserve = FileReserve / 4

// FilesPerNewLog is the descriptors a new, idle log holds: its active
// segment's .log (its indexes are mapped and hold none).
const FilesPerNewLog = 1

// LogFiles returns how many descriptors the logs hold: one per segment (its
// .log), and one per transaction index file open. Each index with entries
// holds a memory mapping instead (see MapLimit).
func (m *Manager) LogFiles() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.logFilesLocked()
}

// logFilesLocked: the caller holds m.mu (either way).
func (m *Manager) logFilesLocked() int {
	n := 0
	for _, l := range m.logs {
		l.mu.RLock()
		for _, s := range l.segs {
			n++
			s.tix.mu.Lock()
			if s.tix.f != nil {
				n++
			}
			s.tix.mu.Unlock()
		}
		l.mu.RUnlock()
	}
	return n
}

// checkCreateLocked refuses a new log when the logs already open leave less
// than createReserve descriptors under the limit. The caller holds m.mu.
func (m *Manager) checkCreateLocked() error {
	limit := FileLimit()
	if limit == 0 || uint64(len(m.logs)+createReserve) < limit {
		return nil
	}
	return tooManyFiles(syscall.EMFILE, len(m.logs))
}

// isTooManyFiles reports whether err is the process's or the system's
// descriptor limit.
func isTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// tooManyFiles wraps err, when it is EMFILE or ENFILE, in
// ErrTooManyOpenFiles with the limit, the number of logs open (each holds a
// file per segment) and what to do.
func tooManyFiles(err error, logs int) error {
	if !isTooManyFiles(err) {
		return err
	}
	return fmt.Errorf("%w: %w: the open file limit (ulimit -n) is %d and %d logs are open, each holding a file per segment: "+
		"raise the limit (ulimit -n, LimitNOFILE= in a systemd unit) to at least %d", ErrTooManyOpenFiles, err,
		FileLimit(), logs, logs+FileReserve+1024)
}

// checkFileLimit warns when the logs leave less than FileReserve descriptors
// under the process's limit (connections would then fail to be accepted, and
// new partitions to be created), and when the mappings of the indexes near
// vm.max_map_count.
func (m *Manager) checkFileLimit() {
	files := m.LogFiles()
	if limit := FileLimit(); limit > 0 && uint64(files+FileReserve) > limit {
		m.logger.Warn("the open file limit is too low for these logs: raise ulimit -n (LimitNOFILE= in a systemd unit)",
			"limit", limit, "log_files", files, "reserve", FileReserve, "want_at_least", files+FileReserve+1024)
	}
	if maps, limit := MapCount(), MapLimit(); limit > 0 && maps > 0 && maps > limit*9/10 {
		m.logger.Warn("memory mappings near vm.max_map_count (each index with entries is one): raise vm.max_map_count",
			"maps", maps, "limit", limit)
	}
}
