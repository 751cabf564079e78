package quorum

import (
	"context"
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
)

// raftLogger adapts a *slog.Logger to raft.Logger. raft's Fatal and Panic are for
// broken invariants: both log and panic (never os.Exit from a library).
type raftLogger struct {
	l *slog.Logger
}

var _ raft.Logger = raftLogger{}

func (r raftLogger) emit(level slog.Level, msg string) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, msg, "component", "raft")
	}
}

func (r raftLogger) Debug(v ...any) { r.emit(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.emit(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any)                 { r.emit(slog.LevelInfo, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.emit(slog.LevelInfo, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.emit(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.emit(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.emit(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.emit(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any)                 { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) { r.Panicf(format, v...) }
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.emit(slog.LevelError, s)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.emit(slog.LevelError, s)
	panic(s)
}
