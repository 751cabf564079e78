//go:build !linux

package transport

import (
	"context"
	"log/slog"
	"net"
)

// Reactor is the epoll transport; on this platform it cannot be built (use Std).
type Reactor struct{}

var _ Transport = (*Reactor)(nil)

// NewReactor returns ErrReactorUnsupported on this platform.
func NewReactor(cfg ReactorConfig, h Handler, log *slog.Logger) (*Reactor, error) {
	return nil, ErrReactorUnsupported
}

// Serve returns ErrReactorUnsupported.
func (*Reactor) Serve(ln net.Listener) error { return ErrReactorUnsupported }

// Shutdown does nothing.
func (*Reactor) Shutdown(ctx context.Context) error { return nil }

// NumConns is 0.
func (*Reactor) NumConns() int { return 0 }
