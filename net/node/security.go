package node

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/kafka"
	"github.com/samsa-broker/samsa/net/transport"
)

// The security of the broker listeners, from Kafka's keys:
//
//	listeners, listener.security.protocol.map    each listener's protocol (config.go)
//	[listener.name.<l>.]ssl.*                    TLS of SSL and SASL_SSL listeners
//	                                             (transport.SSLConfigFromProps)
//	[listener.name.<l>.]sasl.enabled.mechanisms  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
//	listener.name.<l>.<mech>.sasl.jaas.config    PLAIN: user_<name>="password" options
//	                                             are the PLAIN users; without them PLAIN
//	                                             checks passwords against the SCRAM
//	                                             credentials of the metadata image
//	connections.max.reauth.ms, connection.failed.authentication.delay.ms,
//	sasl.server.max.receive.size, ssl.principal.mapping.rules
//	authorizer.class.name                        Kafka's StandardAuthorizer (or
//	                                             AclAuthorizer) name: ACLs enforced
//	super.users, allow.everyone.if.no.acl.found
//
// A listener that is PLAINTEXT on a node without an authorizer is served by the
// broker itself on the node's transport; every other one by a kafka.SecureListener
// on a Std transport of its own (TLS is served by Std only: transport=reactor with an
// SSL or SASL_SSL listener is refused at start-up).
//
// Between nodes (internode.go): the inter-broker and controller listeners take any
// of the four protocols; net/peer dials them with TLS and SASL per
//
//	sasl.mechanism.inter.broker.protocol         what this node authenticates with on
//	sasl.mechanism.controller.protocol           the inter-broker / controller listener
//	listener.name.<l>.<mech>.sasl.jaas.config    username="..." password="...": the
//	                                             credentials it sends (else
//	                                             sasl.jaas.config)
//	listener.name.<l>.connections.max.reauth.ms  a listener's own session lifetime
//
// and a controller serves its CONTROLLER listener with the listener's security
// (readListenerSecurity, authServer), authenticated but not authorized.

// authorizerNames are the authorizer.class.name values that enable the authorizer.
var authorizerNames = map[string]bool{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer": true,
	"kafka.security.authorizer.AclAuthorizer":                 true,
	"samsa": true,
}

// listenerSecurity is one broker listener's configured security.
type listenerSecurity struct {
	l     Listener
	proto auth.SecurityProtocol
	tls   *transport.TLS // SSL and SASL_SSL
	sasl  []string       // mechanisms, SASL protocols
	plain *auth.StaticPlain
	// maxReauth is listener.name.<l>.connections.max.reauth.ms, when set: the
	// listener's own session lifetime.
	maxReauth *time.Duration
}

// nodeSecurity is the security of a broker's listeners.
type nodeSecurity struct {
	authorizer *acl.Authorizer // nil: none
	listeners  map[string]*listenerSecurity
	server     auth.ServerConfig // shared settings; Mechanisms per listener
}

// lookup is Kafka's per-listener lookup of key over cfg's keys.
func lookup(cfg *Config, listener string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		if v, ok := cfg.Keys["listener.name."+strings.ToLower(listener)+"."+key]; ok {
			return v, true
		}
		v, ok := cfg.Keys[key]
		return v, ok
	}
}

// newNodeSecurity reads the security of cfg's broker listeners; errors are start-up
// errors (ErrConfig).
func newNodeSecurity(cfg *Config, log *slog.Logger) (*nodeSecurity, error) {
	s := &nodeSecurity{listeners: map[string]*listenerSecurity{}}
	var err error
	if s.authorizer, err = newAuthorizer(cfg); err != nil {
		return nil, err
	}
	if s.server, err = serverConfig(cfg); err != nil {
		return nil, err
	}
	for _, l := range cfg.BrokerListeners() {
		ls, err := readListenerSecurity(cfg, l, log)
		if err != nil {
			return nil, err
		}
		s.listeners[l.Name] = ls
	}
	return s, nil
}

// newAuthorizer is the authorizer of authorizer.class.name, super.users and
// allow.everyone.if.no.acl.found (nil: no authorizer configured).
func newAuthorizer(cfg *Config) (*acl.Authorizer, error) {
	name := strings.TrimSpace(cfg.Get("authorizer.class.name"))
	if name == "" {
		return nil, nil
	}
	if !authorizerNames[name] {
		return nil, fmt.Errorf("%w: authorizer.class.name %q: only org.apache.kafka.metadata.authorizer.StandardAuthorizer is served", ErrConfig, name)
	}
	supers, err := acl.ParseSuperUsers(cfg.Get("super.users"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return acl.New(acl.Config{SuperUsers: supers, AllowIfNoACL: cfg.Get("allow.everyone.if.no.acl.found") == "true"}), nil
}

// serverConfig is the authentication settings every secured listener shares (its
// mechanisms are the listener's own).
func serverConfig(cfg *Config) (auth.ServerConfig, error) {
	rules, err := auth.ParseMappingRules(cfg.Get("ssl.principal.mapping.rules"))
	if err != nil {
		return auth.ServerConfig{}, fmt.Errorf("%w: ssl.principal.mapping.rules: %v", ErrConfig, err)
	}
	ms := func(key string) time.Duration { return time.Duration(cfg.getInt(key)) * time.Millisecond }
	maxRecv, _ := strconv.Atoi(cfg.Get("sasl.server.max.receive.size"))
	return auth.ServerConfig{MaxReauth: ms("connections.max.reauth.ms"), FailureDelay: ms("connection.failed.authentication.delay.ms"),
		MaxReceiveSize: maxRecv, Principals: auth.PrincipalBuilder{Rules: rules}}, nil
}

// readListenerSecurity reads the security of listener l (a broker listener or the
// controller listener) from cfg's keys; errors are start-up errors (ErrConfig).
func readListenerSecurity(cfg *Config, l Listener, log *slog.Logger) (*listenerSecurity, error) {
	p, ok := auth.ParseSecurityProtocol(l.Protocol)
	if !ok {
		return nil, fmt.Errorf("%w: listener %s: security protocol %q", ErrConfig, l.Name, l.Protocol)
	}
	ls := &listenerSecurity{l: l, proto: p}
	get := lookup(cfg, l.Name)
	if v, ok := cfg.Keys["listener.name."+strings.ToLower(l.Name)+".connections.max.reauth.ms"]; ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%w: listener.name.%s.connections.max.reauth.ms %q", ErrConfig, strings.ToLower(l.Name), v)
		}
		d := time.Duration(ms) * time.Millisecond
		ls.maxReauth = &d
	}
	if p.TLS() {
		if cfg.Transport == "reactor" {
			return nil, fmt.Errorf("%w: listener %s is %s but transport=reactor serves plaintext only: set transport=std", ErrConfig, l.Name, p)
		}
		sc, err := transport.SSLConfigFromProps(get)
		if err != nil {
			return nil, fmt.Errorf("%w: listener %s: %v", ErrConfig, l.Name, err)
		}
		if ls.tls, err = transport.NewTLS(sc, log.With("listener", l.Name)); err != nil {
			return nil, fmt.Errorf("%w: listener %s: %v", ErrConfig, l.Name, err)
		}
	}
	if p.SASL() {
		mechs, ok := get("sasl.enabled.mechanisms")
		if !ok {
			mechs = cfg.Get("sasl.enabled.mechanisms")
		}
		for _, m := range strings.Split(mechs, ",") {
			if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
				ls.sasl = append(ls.sasl, m)
			}
		}
		if jaas, ok := cfg.Keys["listener.name."+strings.ToLower(l.Name)+".plain.sasl.jaas.config"]; ok {
			j, err := auth.ParseJAAS(jaas)
			if err != nil {
				return nil, fmt.Errorf("%w: listener %s PLAIN sasl.jaas.config: %v", ErrConfig, l.Name, err)
			}
			if len(j.Users()) > 0 {
				if ls.plain, err = auth.StaticPlainFromJAAS(j); err != nil {
					return nil, fmt.Errorf("%w: listener %s: %v", ErrConfig, l.Name, err)
				}
			}
		}
		if _, err := auth.Mechanisms(ls.sasl, nil, nil); err != nil {
			return nil, fmt.Errorf("%w: listener %s sasl.enabled.mechanisms: %v", ErrConfig, l.Name, err)
		}
	}
	return ls, nil
}

func firstOr(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// plain reports whether listener name is served by the broker itself (PLAINTEXT, no
// authorizer).
func (s *nodeSecurity) plain(name string) bool {
	ls := s.listeners[name]
	return s.authorizer == nil && (ls == nil || ls.proto == auth.Plaintext)
}

// handler builds the SecureListener of listener name over b, SCRAM credentials read
// from b's image.
func (s *nodeSecurity) handler(name string, b *kafka.Broker) (*kafka.SecureListener, error) {
	ls := s.listeners[name]
	srv, err := ls.authServer(s.server, func() *metadata.Image { _, im := b.Image(); return im })
	if err != nil {
		return nil, err
	}
	return kafka.NewSecureListener(b, kafka.ListenerSecurity{Name: name, Protocol: ls.proto, Auth: srv, Authorizer: s.authorizer})
}

// authServer is the listener's authentication over the shared settings: its SASL
// mechanisms (PLAIN users from its JAAS configuration, else SCRAM credentials read
// from image) and its own session lifetime, if set.
func (ls *listenerSecurity) authServer(shared auth.ServerConfig, image func() *metadata.Image) (*auth.Server, error) {
	cfg := shared
	if ls.maxReauth != nil {
		cfg.MaxReauth = *ls.maxReauth
	}
	if ls.proto.SASL() {
		var plain auth.PlainAuthenticator
		if ls.plain != nil {
			plain = ls.plain
		}
		mechs, err := auth.Mechanisms(ls.sasl, auth.ImageCredentials(image), plain)
		if err != nil {
			return nil, err
		}
		cfg.Mechanisms = mechs
	}
	return auth.NewServer(cfg)
}

// protocolID is the metadata.Endpoint id of a listener's protocol name.
func protocolID(name string) int16 {
	p, _ := auth.ParseSecurityProtocol(name)
	return int16(p)
}

// close stops the TLS stores' watchers.
func (s *nodeSecurity) close() {
	for _, ls := range s.listeners {
		if ls.tls != nil {
			ls.tls.Close()
		}
	}
}
