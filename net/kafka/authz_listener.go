package kafka

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

// ListenerSecurity is the security of one client listener: its protocol
// (listener.security.protocol.map), its authentication (the SASL mechanisms, principal
// mapping, re-authentication and failure delay of net/auth), and the node's authorizer
// (authorizer.class.name; nil: every request is allowed, as Kafka without an
// authorizer).
type ListenerSecurity struct {
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

// SecureListener serves one client listener of b with its security: it implements
// transport.Handler and transport.ConnObserver in place of the Broker on that
// listener. Per connection it keeps an auth.Session (which requests may come before
// authentication, the SASL exchange, the principal, re-authentication) and hands every
// admitted request to the broker's handler table, authorised by net/authz (authz.go)
// when an authorizer is configured.
//
// A request refused by the session (anything but ApiVersions and the SASL requests
// before authentication, anything after a failure or an expired session) closes the
// connection without an answer, as Kafka does. On SASL listeners the request size is
// held to sasl.server.max.receive.size until the connection authenticates.
//
// Safe for concurrent use: Serve runs on each connection's read goroutine.
type SecureListener struct {
	b     *Broker
	sec   ListenerSecurity
	log   *slog.Logger
	conns sync.Map // conn id → *connSecurity
}

var (
	_ transport.Handler      = (*SecureListener)(nil)
	_ transport.ConnObserver = (*SecureListener)(nil)
)

// NewSecureListener returns the handler of a listener of b with security sec.
func NewSecureListener(b *Broker, sec ListenerSecurity) (*SecureListener, error) {
	if b == nil || sec.Auth == nil {
		return nil, errors.New("kafka: a secure listener needs a broker and an auth server")
	}
	if sec.Now == nil {
		sec.Now = time.Now
	}
	return &SecureListener{b: b, sec: sec, log: b.log.With("listener", sec.Name)}, nil
}

// secOf is r's connection security (Request.Sec, set by the listener that admitted
// it), nil on a listener without one.
func secOf(r *Request) *connSecurity {
	cs, _ := r.Sec.(*connSecurity)
	return cs
}

// connSecurity is one connection's security state. Its session is used by the
// connection's read goroutine only (Serve, and the SASL handlers, which answer inline).
type connSecurity struct {
	l       *SecureListener
	conn    transport.Conn
	session *auth.Session
	ctx     acl.Context // principal and host, refreshed after each authentication
}

// ConnOpened implements transport.ConnObserver: it starts the connection's session.
func (l *SecureListener) ConnOpened(c transport.Conn) {
	l.b.ConnOpened(c)
	if _, err := l.state(c); err != nil {
		l.log.Info("refusing connection", "remote", c.RemoteAddr(), "err", err)
		c.Close()
	}
}

// ConnClosed implements transport.ConnObserver.
func (l *SecureListener) ConnClosed(c transport.Conn) {
	l.conns.Delete(c.ID())
	l.b.ConnClosed(c)
}

// state returns c's security state, creating it on the connection's first sight.
func (l *SecureListener) state(c transport.Conn) (*connSecurity, error) {
	if v, ok := l.conns.Load(c.ID()); ok {
		return v.(*connSecurity), nil
	}
	var tlsState *tls.ConnectionState
	if st, ok := transport.TLSState(c); ok {
		tlsState = &st
	}
	ses, err := l.sec.Auth.NewSession(l.sec.Protocol, tlsState, l.sec.Now())
	if err != nil {
		return nil, err
	}
	cs := &connSecurity{l: l, conn: c, session: ses, ctx: acl.Context{Host: acl.HostOf(c.RemoteAddr())}}
	if ses.Authenticated() {
		cs.ctx.Principal = ses.Principal().String()
	}
	if l.sec.Protocol.SASL() {
		transport.SetMaxRequestBytes(c, int32(l.sec.Auth.MaxReceiveSize()))
	}
	l.conns.Store(c.ID(), cs)
	return cs, nil
}

// Serve implements transport.Handler.
func (l *SecureListener) Serve(tr transport.Request) {
	cs := l.admit(tr, l.b.metrics)
	if cs == nil {
		return
	}
	api, r := parseRequest(tr, brokerAPIs, l.b.metrics, l.log, l.b.apiVersions)
	if r == nil {
		return
	}
	r.Sec = cs
	defer request.Recover(r, l.log, &l.b.panics)
	if !l.authorize(r, api) { // authz.go
		return
	}
	if r.Header.Key == findCoordinatorKey {
		l.b.route.advertiseListener(r)
	}
	l.b.handle(api, r) // quotas.go
}

// admit runs tr through its connection's session before the request is parsed: a
// raw SASL token is answered here, a request the session does not admit closes the
// connection (counted in m). It returns the connection's state when the request is
// to be served, nil when it was handled. The controller listener's handler
// (controller_security.go) shares it.
func (l *SecureListener) admit(tr transport.Request, m *metrics) *connSecurity {
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
		request.Reject(tr, &h, m.Metrics, l.log, err)
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

const findCoordinatorKey = 10

// rawToken answers a raw SASL token (after a version-0 SaslHandshake) with a raw frame.
func (cs *connSecurity) rawToken(tr transport.Request, now time.Time) {
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
func (cs *connSecurity) authenticated() {
	cs.ctx.Principal = cs.session.Principal().String()
	transport.SetMaxRequestBytes(cs.conn, 0)
}

// closeAfterDelay closes a connection whose authentication failed after
// connection.failed.authentication.delay.ms (KIP-306), without holding the read path.
func (l *SecureListener) closeAfterDelay(t transport.Ticket) {
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

// listenerOf is the name of the listener r arrived on: its SecureListener's, or, on a
// listener the Broker serves itself, the one its transport accepted the connection
// on ("" when unnamed).
func listenerOf(r *Request) string {
	if secOf(r) != nil {
		return secOf(r).l.sec.Name
	}
	if r.Conn == nil {
		return ""
	}
	return transport.ListenerOf(r.Conn)
}
