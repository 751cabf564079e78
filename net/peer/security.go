package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// ErrAuthentication: the peer refused this node's TLS handshake or SASL
// authentication (a wrong password, a mechanism the listener does not enable, an
// untrusted certificate), or the peer's SASL answers did not verify (a SCRAM server
// signature). The connection was closed; it is dialled again after the backoff.
var ErrAuthentication = errors.New("peer: authentication failed")

// Security is how a listener of the other nodes is reached: the inter-broker
// listener's (Config.BrokerSecurity) or the controller listener's
// (Config.VoterSecurity, which the bootstrap servers share). The zero value is
// PLAINTEXT.
//
//	dial ─▶ TLS handshake (TLS set: SSL, SASL_SSL)
//	     ─▶ ApiVersions (the peer's versions; its cluster and node id checked)
//	     ─▶ SaslHandshake v1 + SaslAuthenticate v1-2 until done (SASL set)
//	     ─▶ requests; SaslHandshake + SaslAuthenticate again on the same connection
//	        at 85-95% of the session lifetime the peer answered (KIP-368)
//
// ApiVersions comes before SASL, as in Kafka's client (it is served before
// authentication), so credentials are never sent to a peer of another cluster or
// another node that answers at the address. A failed re-authentication closes the
// connection (its requests fail with ErrAuthentication); the next request dials
// again.
type Security struct {
	// TLS, when set, returns the client configuration for a connection to host (the
	// address's host part: the name the server's certificate is checked against
	// unless the configuration says otherwise). Called at each dial, so a reloaded
	// trust or key store applies to the next connection.
	TLS func(host string) (*tls.Config, error)
	// SASL, when set, is the mechanism each connection authenticates with (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512 of franz-go's pkg/sasl, or any sasl.Mechanism
	// whose final step sends nothing more).
	SASL sasl.Mechanism
}

// security is the Security of a target's role.
func (c *Client) security(r Role) Security {
	if r == RoleBroker {
		return c.cfg.BrokerSecurity
	}
	return c.cfg.VoterSecurity
}

// startTLS runs the TLS handshake of sec over nc (addr's host names the server).
func startTLS(ctx context.Context, sec Security, nc net.Conn, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	cfg, err := sec.TLS(host)
	if err != nil {
		return nil, fmt.Errorf("%w: TLS configuration: %w", ErrAuthentication, err)
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if tlsRefused(err) {
			return nil, fmt.Errorf("%w: TLS handshake: %w", ErrAuthentication, err)
		}
		return nil, fmt.Errorf("%w: TLS handshake: %w", ErrConnection, err)
	}
	return tc, nil
}

// tlsRefused reports whether err is a TLS refusal: this side did not verify the
// peer's certificate, or the peer sent an alert (it did not verify ours, or the
// versions or suites do not meet).
func tlsRefused(err error) bool {
	var ce *tls.CertificateVerificationError
	var ae tls.AlertError
	var oe *net.OpError // crypto/tls reports a peer's alert as a "remote error"
	return errors.As(err, &ce) || errors.As(err, &ae) || (errors.As(err, &oe) && oe.Op == "remote error")
}

// authenticate runs one SASL exchange of m on cn (after its ApiVersions handshake,
// with the reader running) and returns when the session expires (zero: never), as
// the time the last SaslAuthenticate was sent plus the lifetime the peer answered: the
// peer's clock started no earlier. It serves the first authentication and KIP-368's
// re-authentications alike: the peer handles them in order with the connection's
// other requests.
func (cn *conn) authenticate(ctx context.Context, m sasl.Mechanism, addr string) (time.Time, error) {
	var zero time.Time
	if r, ok := cn.versions[17]; !ok || r.max < 1 {
		return zero, fmt.Errorf("%w: the peer does not serve SaslHandshake v1", ErrAuthentication)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = m.Name()
	resp, err := cn.roundTripAt(ctx, hs, 1)
	if err != nil {
		return zero, err
	}
	if h := resp.(*kmsg.SASLHandshakeResponse); h.ErrorCode != 0 {
		return zero, fmt.Errorf("%w: SaslHandshake %s: %w (the listener enables %v)", ErrAuthentication, m.Name(), kerr.ErrorForCode(h.ErrorCode), h.SupportedMechanisms)
	}
	v, err := cn.version(36, 2)
	if err != nil || v < 1 {
		return zero, fmt.Errorf("%w: the peer does not serve SaslAuthenticate v1+", ErrAuthentication)
	}
	ses, msg, err := m.Authenticate(ctx, addr)
	if err != nil {
		return zero, fmt.Errorf("%w: %s: %w", ErrAuthentication, m.Name(), err)
	}
	for step := 0; ; step++ {
		if step >= 8 {
			return zero, fmt.Errorf("%w: %s: the exchange does not end", ErrAuthentication, m.Name())
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = msg
		sent := time.Now()
		resp, err := cn.roundTripAt(ctx, req, v)
		if err != nil {
			return zero, err
		}
		a := resp.(*kmsg.SASLAuthenticateResponse)
		if a.ErrorCode != 0 {
			detail := ""
			if a.ErrorMessage != nil {
				detail = ": " + *a.ErrorMessage
			}
			return zero, fmt.Errorf("%w: %s: %w%s", ErrAuthentication, m.Name(), kerr.ErrorForCode(a.ErrorCode), detail)
		}
		done, next, err := ses.Challenge(a.SASLAuthBytes)
		if err != nil {
			return zero, fmt.Errorf("%w: %s: %w", ErrAuthentication, m.Name(), err)
		}
		if done {
			if len(next) > 0 {
				return zero, fmt.Errorf("%w: %s: a final client message is not supported", ErrAuthentication, m.Name())
			}
			if a.SessionLifetimeMillis <= 0 {
				return zero, nil
			}
			return sent.Add(time.Duration(a.SessionLifetimeMillis) * time.Millisecond), nil
		}
		msg = next
	}
}

// reauthDelay is when to re-authenticate a session that has d left: at 85-95% of
// it, as Kafka's client does.
func reauthDelay(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.85 + 0.1*rand.Float64()))
}

// scheduleReauth arranges cn's re-authentication before its session expires at
// expiry (nothing when it never does).
func (cn *conn) scheduleReauth(m sasl.Mechanism, addr string, expiry time.Time) {
	if expiry.IsZero() {
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.mu.err != nil {
		return
	}
	cn.mu.reauth = time.AfterFunc(reauthDelay(time.Until(expiry)), func() { cn.reauthenticate(m, addr, expiry) })
}

// reauthenticate re-authenticates cn (KIP-368) before its session expires at
// deadline, or closes it.
func (cn *conn) reauthenticate(m sasl.Mechanism, addr string, deadline time.Time) {
	if !cn.alive() {
		return
	}
	// The peer takes the exchange's requests after the expiry too, once the
	// handshake came before it; other requests wait for the exchange (send).
	ctx, cancel := context.WithDeadline(cn.s.c.ctx, deadline.Add(cn.s.c.cfg.RequestTimeout))
	defer cancel()
	g := make(chan struct{})
	cn.wmu.Lock()
	cn.reauthing = g
	cn.wmu.Unlock()
	next, err := cn.authenticate(ctx, m, addr)
	cn.wmu.Lock()
	cn.reauthing = nil
	cn.wmu.Unlock()
	close(g)
	if err != nil {
		if !errors.Is(err, ErrAuthentication) && (errors.Is(err, ErrConnection) || errors.Is(err, ErrTimeout) || ctx.Err() != nil) {
			// The connection was lost (the peer closed it, or was stopped past the
			// exchange's deadline): not a refusal. The next request dials again and
			// authenticates anew.
			cn.s.c.log.Info("peer connection lost during re-authentication; reconnecting", "to", cn.s.key.to.String(), "purpose", string(cn.s.key.purpose), "err", err)
			cn.fail(err)
			return
		}
		if !errors.Is(err, ErrAuthentication) {
			err = fmt.Errorf("%w: re-authentication: %w", ErrAuthentication, err)
		}
		cn.s.c.authFailures.Add(1)
		cn.s.c.log.Warn("peer re-authentication failed; closing the connection", "to", cn.s.key.to.String(), "purpose", string(cn.s.key.purpose), "err", err)
		cn.fail(err)
		return
	}
	cn.s.c.reauth.Add(1)
	cn.s.c.log.Debug("peer re-authenticated", "to", cn.s.key.to.String(), "purpose", string(cn.s.key.purpose), "expires", next)
	cn.scheduleReauth(m, addr, next)
}

// Reauthentications is the number of connections' sessions renewed so far (KIP-368
// re-authentications that succeeded).
func (c *Client) Reauthentications() int64 { return c.reauth.Load() }

// AuthenticationFailures is the number of dials and re-authentications that failed
// with ErrAuthentication so far.
func (c *Client) AuthenticationFailures() int64 { return c.authFailures.Load() }
