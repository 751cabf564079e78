package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/connauth"
	"github.com/samsa-broker/samsa/net/metadatacache"
	"github.com/samsa-broker/samsa/net/request"
	"github.com/samsa-broker/samsa/net/transport"
)

// ListenerSecurity is the security of one client listener (net/connauth): its
// protocol, its authentication and the node's authorizer.
type ListenerSecurity = connauth.Security

// SecureListener serves one client listener of b with its security: it implements
// transport.Handler and transport.ConnObserver in place of the Broker on that
// listener. Per connection net/connauth keeps an auth.Session (which requests may
// come before authentication, the SASL exchange, the principal, re-authentication)
// and admits each frame; every admitted request goes to the broker's handler table,
// authorised by net/authz (authz.go) when an authorizer is configured.
//
// Safe for concurrent use: Serve runs on each connection's read goroutine.
type SecureListener struct {
	b        *Broker
	sessions *connauth.Listener
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
	sessions, err := connauth.New(sec, b.log.With("listener", sec.Name))
	if err != nil {
		return nil, err
	}
	return &SecureListener{b: b, sessions: sessions}, nil
}

// ConnOpened implements transport.ConnObserver: it starts the connection's session.
func (l *SecureListener) ConnOpened(c transport.Conn) {
	l.b.ConnOpened(c)
	l.sessions.Opened(c)
}

// ConnClosed implements transport.ConnObserver.
func (l *SecureListener) ConnClosed(c transport.Conn) {
	l.sessions.Closed(c)
	l.b.ConnClosed(c)
}

// Serve implements transport.Handler.
func (l *SecureListener) Serve(tr transport.Request) {
	cs := l.sessions.Admit(tr, l.b.metrics.Metrics)
	if cs == nil {
		return
	}
	log := l.sessions.Log()
	api, r := parseRequest(tr, brokerAPIs, l.b.metrics, log, l.b.apiVersions)
	if r == nil {
		return
	}
	r.Sec = cs
	defer request.Recover(r, log, &l.b.panics)
	if !l.authorize(r, api) { // authz.go
		return
	}
	if r.Header.Key == findCoordinatorKey {
		advertiseListener(l.b.route, r)
	}
	l.b.handle(api, r) // quotas.go
}

const findCoordinatorKey = 10

// secOf is r's connection security (Request.Sec, set by the listener that admitted
// it), nil on a listener without one.
func secOf(r *Request) *connauth.Conn { return connauth.Of(r) }

// listenerOf is the name of the listener r arrived on: its SecureListener's, or, on a
// listener the Broker serves itself, the one its transport accepted the connection
// on ("" when unnamed).
func listenerOf(r *Request) string {
	if cs := secOf(r); cs != nil {
		return cs.Listener()
	}
	if r.Conn == nil {
		return ""
	}
	return transport.ListenerOf(r.Conn)
}

// advertiseListener makes FindCoordinator's answer name the coordinators' endpoints
// of r's listener (Metadata and DescribeCluster call endpointFor themselves).
func advertiseListener(rt metadatacache.Routing, r *Request) {
	r.AmendWith(func(resp kmsg.Response) {
		im := rt.View.Image()
		fc := resp.(*kmsg.FindCoordinatorResponse)
		if bi, ok := im.Broker(fc.NodeID); ok && fc.ErrorCode == 0 {
			fc.Host, fc.Port = rt.EndpointFor(listenerOf(r), bi)
		}
		for i := range fc.Coordinators {
			c := &fc.Coordinators[i]
			if bi, ok := im.Broker(c.NodeID); ok && c.ErrorCode == 0 {
				c.Host, c.Port = rt.EndpointFor(listenerOf(r), bi)
			}
		}
	})
}
