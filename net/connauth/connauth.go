// Package connauth is the authentication of a listener's connections, below the
// protocol adapter (Kafka's ChannelBuilders and SaslServerAuthenticator): per
// connection an auth.Session of net/auth (which requests may come before
// authentication, the SASL exchange, the principal, re-authentication), kept from
// the connection's first sight to its close; the admission of each frame before it
// is parsed; the raw SASL tokens that follow a version-0 SaslHandshake; and the
// SaslHandshake and SaslAuthenticate requests, which the listeners' handler tables
// (net/kafka's broker and controller tables) route here.
//
// A request refused by the session (anything but ApiVersions and the SASL requests
// before authentication, anything after a failure or an expired session) closes the
// connection without an answer, as Kafka does. On SASL listeners the request size is
// held to sasl.server.max.receive.size until the connection authenticates.
//
// Safe for concurrent use: a connection's Conn is used by its read goroutine only
// (Admit, and the SASL handlers, which answer inline).
package connauth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/request"
	"github.com/samsa-broker/samsa/net/transport"
	"github.com/samsa-broker/samsa/net/wire"
)

// Security is the security of one listener: its protocol
// (listener.security.protocol.map), its authentication (the SASL mechanisms, principal
// mapping, re-authentication and failure delay of net/auth), and the node's authorizer
// (authorizer.class.name; nil: every request is allowed, as Kafka without an
// authorizer).
type Security struct {
	Name     string
	Protocol auth.SecurityProtocol
	// Auth is required for every protocol (PLAINTEXT and SSL use it for the principal;
	// SASL protocols for the mechanisms).
	Auth *auth.Server
	// Authorizer decides every request; nil: none.
	Authorizer *acl.Authorizer
	// Now is the clock of sessions (nil: time.Now).
	Now func() time.Time
}

// Listener keeps the sessions of one listener's connections.
type Listener struct {
	sec   Security
	log   *slog.Logger
	conns sync.Map // conn id → *Conn
}

// New returns the session keeper of a listener with security sec (sec.Auth required).
func New(sec Security, log *slog.Logger) (*Listener, error) {
	if sec.Auth == nil {
		return nil, errors.New("connauth: a secured listener needs an auth server")
	}
	if sec.Now == nil {
		sec.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{sec: sec, log: log}, nil
}

// Security is the listener's security.
func (l *Listener) Security() Security { return l.sec }

// Log is the listener's logger.
func (l *Listener) Log() *slog.Logger { return l.log }

// Conn is one connection's security state, the Request.Sec of its requests.
type Conn struct {
	l       *Listener
	conn    transport.Conn
	session *auth.Session
	ctx     acl.Context // principal and host, refreshed after each authentication
}

// Listener is the name of the listener the connection arrived on.
func (cs *Conn) Listener() string { return cs.l.sec.Name }

// Authorizer is the listener's authorizer (nil: none).
func (cs *Conn) Authorizer() *acl.Authorizer { return cs.l.sec.Authorizer }

// Principal is the connection's principal and host, as the authorizer reads them.
func (cs *Conn) Principal() acl.Context { return cs.ctx }

// Of is r's connection security (Request.Sec), nil on a listener without one.
func Of(r *request.Request) *Conn {
	cs, _ := r.Sec.(*Conn)
	return cs
}

// Opened starts c's session; a connection the session refuses (an SSL client
// certificate no mapping rule maps) is closed and the error returned.
func (l *Listener) Opened(c transport.Conn) error {
	if _, err := l.state(c); err != nil {
		l.log.Info("refusing connection", "remote", c.RemoteAddr(), "err", err)
		c.Close()
		return err
	}
	return nil
}

// Closed forgets c's session.
func (l *Listener) Closed(c transport.Conn) { l.conns.Delete(c.ID()) }

// Conns is how many connections have a session.
func (l *Listener) Conns() int {
	n := 0
	l.conns.Range(func(any, any) bool { n++; return true })
	return n
}

// state returns c's security state, creating it on the connection's first sight.
func (l *Listener) state(c transport.Conn) (*Conn, error) {
	if v, ok := l.conns.Load(c.ID()); ok {
		return v.(*Conn), nil
	}
	var tlsState *tls.ConnectionState
	if st, ok := transport.TLSState(c); ok {
		tlsState = &st
	}
	ses, err := l.sec.Auth.NewSession(l.sec.Protocol, tlsState, l.sec.Now())
	if err != nil {
		return nil, err
	}
	cs := &Conn{l: l, conn: c, session: ses, ctx: acl.Context{Host: acl.HostOf(c.RemoteAddr())}}
	if ses.Authenticated() {
		cs.ctx.Principal = ses.Principal().String()
	}
	if l.sec.Protocol.SASL() {
		transport.SetMaxRequestBytes(c, int32(l.sec.Auth.MaxReceiveSize()))
	}
	l.conns.Store(c.ID(), cs)
	return cs, nil
}

// Admit runs tr through its connection's session before the request is parsed: a
// raw SASL token is answered here, a request the session does not admit closes the
// connection (counted in m). It returns the connection's state when the request is
// to be served, nil when it was handled.
func (l *Listener) Admit(tr transport.Request, m *request.Metrics) *Conn {
	cs, err := l.state(tr.Conn)
	if err != nil {
		tr.Ticket.CloseConn()
		return nil
	}
	now := l.sec.Now()
	if cs.session.ExpectsRawToken() {
		cs.rawToken(tr, now)
		return nil
	}
	h, err := wire.ParseFixedHeader(tr.Frame)
	if err != nil {
		request.Reject(tr, &h, m, l.log, err)
		return nil
	}
	if err := cs.session.Admit(h.Key, now); err != nil {
		l.log.Debug("closing connection: request before authentication", "remote", tr.Conn.RemoteAddr(), "key", h.Key, "err", err)
		m.Rejected()
		tr.Ticket.CloseConn()
		return nil
	}
	return cs
}

// rawToken answers a raw SASL token (after a version-0 SaslHandshake) with a raw frame.
func (cs *Conn) rawToken(tr transport.Request, now time.Time) {
	res, err := cs.session.RawToken(tr.Frame, now)
	if err != nil {
		cs.l.log.Info("SASL authentication failed", "remote", tr.Conn.RemoteAddr(), "err", err, "reason", failureReason(err))
		cs.l.closeAfterDelay(tr.Ticket)
		return
	}
	if res.Done {
		cs.authenticated()
	}
	out := append([]byte(nil), res.Challenge...)
	tr.Ticket.Respond(transport.Response{Chunks: []transport.Chunk{{Bytes: out}}})
}

// authenticated records the session's principal and lifts the pre-authentication
// request size limit.
func (cs *Conn) authenticated() {
	cs.ctx.Principal = cs.session.Principal().String()
	transport.SetMaxRequestBytes(cs.conn, 0)
}

// closeAfterDelay closes a connection whose authentication failed after
// connection.failed.authentication.delay.ms (KIP-306), without holding the read path.
func (l *Listener) closeAfterDelay(t transport.Ticket) {
	d := l.sec.Auth.FailureDelay()
	if d <= 0 {
		t.CloseConn()
		return
	}
	time.AfterFunc(d, t.CloseConn)
}

// failureReason is the broker-side reason of an authentication failure (never sent).
func failureReason(err error) string {
	var f *auth.Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return fmt.Sprint(err)
}

// saslCloseGrace is how long after a refusal's answer its connection is closed.
const saslCloseGrace = time.Second

// closeSoon closes c after saslCloseGrace (its last answer leaves first).
func (l *Listener) closeSoon(c transport.Conn) {
	time.AfterFunc(saslCloseGrace, func() { c.Close() })
}
