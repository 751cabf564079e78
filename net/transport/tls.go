package transport

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TLS serves a listener's TLS (SSL and SASL_SSL listeners) on the Std transport, and
// builds the client side for node-to-node connections, from one SSLConfig. It reloads
// its key and trust store files without a restart: Reload (or the watcher Watch
// starts) re-reads them and, when their bytes changed and still make a valid
// configuration, swaps it in; every handshake after the swap uses the new certificate
// and trust store, connections already established keep theirs. Each configuration gets
// its own session ticket keys, so a session established before a swap is not resumed
// after it (a resumed session would skip the new trust store's checks). A change that
// does not load (a half-written file) keeps the old configuration; it is logged and
// retried at the next check.
//
// The reactor serves plaintext only (ErrUnsupportedConn for a TLS listener): serve TLS
// listeners with Std. What TLS costs on Std, measured, and why the reactor stays
// plaintext, is in the package doc.
//
// Safe for concurrent use.
type TLS struct {
	cfg SSLConfig
	log *slog.Logger

	cur atomic.Pointer[tlsState]

	mu         sync.Mutex // serialises Reload
	failedSum  [32]byte   // of the last change that did not load (logged once)
	watchStop  chan struct{}
	watchDone  chan struct{}
	reloads    atomic.Int64
	reloadErrs atomic.Int64
}

type tlsState struct {
	m      material
	sum    [32]byte
	server *tls.Config // nil when the configuration has no key store
}

// NewTLS loads cfg's stores and checks the configuration. log may be nil.
func NewTLS(cfg SSLConfig, log *slog.Logger) (*TLS, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &TLS{cfg: cfg, log: log}
	st, err := t.build()
	if err != nil {
		return nil, err
	}
	if _, err := cfg.baseConfig(); err != nil {
		return nil, err
	}
	t.cur.Store(st)
	return t, nil
}

func (t *TLS) build() (*tlsState, error) {
	m, err := t.cfg.loadMaterial()
	if err != nil {
		return nil, err
	}
	st := &tlsState{m: m, sum: sha256.Sum256([]byte(m.sum))}
	if m.cert != nil {
		if st.server, err = t.cfg.serverConfig(m); err != nil {
			return nil, err
		}
		var key [32]byte
		_, _ = rand.Read(key[:])
		st.server.SetSessionTicketKeys([][32]byte{key})
	}
	return st, nil
}

// ServerConfig returns the configuration to serve TLS with (tls.NewListener, or
// Listener): it resolves every handshake to the current configuration. It fails when
// cfg has no key store.
func (t *TLS) ServerConfig() (*tls.Config, error) {
	if t.cur.Load().server == nil {
		return nil, fmt.Errorf("%w: a TLS listener needs a key store", ErrTLSConfig)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS10, // the current configuration decides
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.cur.Load().server, nil
		},
	}, nil
}

// Listener wraps ln so that Std serves TLS on it.
func (t *TLS) Listener(ln net.Listener) (net.Listener, error) {
	cfg, err := t.ServerConfig()
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, cfg), nil
}

// ClientConfig returns the client side for a connection to serverName (node-to-node
// connections of an SSL or SASL_SSL inter-broker or controller listener): the trust
// store (or the system's roots) verifies the server; the key store, if any, is the
// client certificate (mTLS); with ssl.endpoint.identification.algorithm empty only
// the chain is verified, not the name. Each call reads the current configuration, so
// a new connection after a reload uses the new stores.
func (t *TLS) ClientConfig(serverName string) (*tls.Config, error) {
	cfg, err := t.cfg.baseConfig()
	if err != nil {
		return nil, err
	}
	st := t.cur.Load()
	if t.cfg.Protocol != "" {
		for _, v := range tlsVersions {
			if strings.EqualFold(v.name, t.cfg.Protocol) && v.v < cfg.MaxVersion {
				cfg.MaxVersion = v.v // ssl.protocol caps what the client offers
			}
		}
	}
	cfg.RootCAs = st.m.roots
	if st.m.cert != nil {
		cfg.Certificates = []tls.Certificate{*st.m.cert}
	}
	cfg.ServerName = serverName
	switch t.cfg.EndpointIdentification {
	case "https", "HTTPS":
	case "":
		roots := st.m.roots
		cfg.InsecureSkipVerify = true // the chain is verified below, the name is not
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("transport: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, fmt.Errorf("%w: ssl.endpoint.identification.algorithm %q (https or empty)", ErrTLSConfig, t.cfg.EndpointIdentification)
	}
	return cfg, nil
}

// Certificate returns the leaf certificate handshakes present now (nil without a key
// store).
func (t *TLS) Certificate() *x509.Certificate {
	if c := t.cur.Load().m.cert; c != nil {
		return c.Leaf
	}
	return nil
}

// Reload re-reads the key and trust stores. It reports whether the configuration
// changed; on an error the current configuration stays.
func (t *TLS) Reload() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := t.build()
	if err != nil {
		t.reloadErrs.Add(1)
		return false, err
	}
	if st.sum == t.cur.Load().sum {
		return false, nil
	}
	t.cur.Store(st)
	t.reloads.Add(1)
	t.failedSum = [32]byte{}
	if c := st.m.cert; c != nil {
		t.log.Info("TLS key store reloaded", "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter)
	} else {
		t.log.Info("TLS trust store reloaded")
	}
	return true, nil
}

// Reloads is the number of configuration swaps so far.
func (t *TLS) Reloads() int64 { return t.reloads.Load() }

// check is one watcher step: reload, logging a failing change once.
func (t *TLS) check() {
	if _, err := t.Reload(); err != nil {
		sum := sha256.Sum256([]byte(err.Error()))
		t.mu.Lock()
		first := sum != t.failedSum
		t.failedSum = sum
		t.mu.Unlock()
		if first {
			t.log.Warn("TLS stores changed but do not load; keeping the current ones", "err", err)
		}
	}
}

// Watch checks the stores every samsa.ssl.reload.interval.ms (ReloadInterval) until
// Close; without files, or with an interval of 0, it does nothing. The files' bytes are
// compared, not their times, so a rename over a file, a symlink swap (Kubernetes
// secrets) and an edit in place are all seen.
func (t *TLS) Watch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watchStop != nil || t.cfg.ReloadInterval <= 0 || (t.cfg.KeystoreLocation == "" && t.cfg.TruststoreLocation == "") {
		return
	}
	t.watchStop, t.watchDone = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}, every time.Duration) {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				t.check()
			}
		}
	}(t.watchStop, t.watchDone, t.cfg.ReloadInterval)
}

// Close stops the watcher and waits for it.
func (t *TLS) Close() {
	t.mu.Lock()
	stop, done := t.watchStop, t.watchDone
	t.watchStop = nil
	t.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// TLSState returns the TLS state of a connection served by Std over a TLS listener
// (false for plaintext connections and other transports). The handshake is complete
// before the handler hears of the connection (ConnOpened) or sees its first request,
// so PeerCertificates holds the client's verified chain when it sent one.
func TLSState(c Conn) (tls.ConnectionState, bool) {
	if sc, ok := c.(*stdConn); ok {
		if tc, ok := sc.nc.(*tls.Conn); ok {
			return tc.ConnectionState(), true
		}
	}
	return tls.ConnectionState{}, false
}
