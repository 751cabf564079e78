package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SSLConfig is a listener's TLS configuration in Kafka's ssl.* keys (the listener's
// listener.name.<name>.ssl.* keys, falling back to the unprefixed ones: see
// ListenerLookup). What Samsa reads:
//
//	ssl.keystore.type                PEM (or unset); JKS and PKCS12 are refused
//	ssl.keystore.location            a PEM file with the private key and the
//	                                 certificate chain (leaf first); watched for changes
//	ssl.keystore.certificate.chain   the chain as PEM text (instead of a location)
//	ssl.keystore.key                 the private key as PEM text (with the chain)
//	ssl.key.password                 the password of an ENCRYPTED PRIVATE KEY (PBES2:
//	                                 PBKDF2 + AES-CBC or DES-EDE3-CBC)
//	ssl.keystore.password            refused with PEM, as Kafka refuses it
//	ssl.truststore.type              PEM (or unset)
//	ssl.truststore.location          a PEM file of CA certificates; watched
//	ssl.truststore.certificates      the CA certificates as PEM text
//	ssl.truststore.password          refused with PEM
//	ssl.client.auth                  none (default) | requested | required
//	ssl.enabled.protocols            default TLSv1.2,TLSv1.3; a contiguous range of
//	                                 TLSv1, TLSv1.1, TLSv1.2, TLSv1.3
//	ssl.cipher.suites                IANA names as Go knows them (tls.CipherSuites);
//	                                 TLS 1.3 suites cannot be chosen in Go: naming one
//	                                 keeps TLS 1.3 (all its suites), naming none
//	                                 disables TLS 1.3 (as in Java); Go's insecure
//	                                 suites are refused
//	ssl.protocol                     client side: TLSv1.2 or TLSv1.3 (default); checked
//	ssl.endpoint.identification.algorithm   client side: https (default: verify the
//	                                 server's name) or empty (verify the chain only)
//	samsa.ssl.reload.interval.ms     Samsa: how often the key and trust store files are
//	                                 checked for changes (default 10000; 0: never)
//
// Without a trust store, client certificates (ssl.client.auth) and servers (client
// side) are verified against the system's roots, as Java uses its default trust store.
type SSLConfig struct {
	KeystoreType             string
	KeystoreLocation         string
	KeystoreCertificateChain string
	KeystoreKey              string
	KeystorePassword         string
	KeyPassword              string
	HasKeyPassword           bool // ssl.key.password is set (and not empty)
	TruststoreType           string
	TruststoreLocation       string
	TruststoreCertificates   string
	TruststorePassword       string
	ClientAuth               string
	EnabledProtocols         []string
	CipherSuites             []string
	Protocol                 string
	EndpointIdentification   string
	ReloadInterval           time.Duration
}

// DefaultTLSReloadInterval is samsa.ssl.reload.interval.ms's default.
const DefaultTLSReloadInterval = 10 * time.Second

// ListenerLookup returns the lookup Kafka applies to a listener's keys: the value of
// listener.name.<listener, lower case>.<key> if set, else <key>. props are the node's
// properties.
func ListenerLookup(props map[string]string, listener string) func(key string) (string, bool) {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	return func(key string) (string, bool) {
		if v, ok := props[prefix+key]; ok {
			return v, true
		}
		v, ok := props[key]
		return v, ok
	}
}

// SSLConfigFromProps reads a listener's ssl.* keys through get (ListenerLookup).
func SSLConfigFromProps(get func(key string) (string, bool)) (SSLConfig, error) {
	str := func(k string) string { v, _ := get(k); return strings.TrimSpace(v) }
	list := func(k string) []string {
		var out []string
		for _, it := range strings.Split(str(k), ",") {
			if it = strings.TrimSpace(it); it != "" {
				out = append(out, it)
			}
		}
		return out
	}
	c := SSLConfig{
		KeystoreType:             str("ssl.keystore.type"),
		KeystoreLocation:         str("ssl.keystore.location"),
		KeystoreCertificateChain: str("ssl.keystore.certificate.chain"),
		KeystoreKey:              str("ssl.keystore.key"),
		KeystorePassword:         str("ssl.keystore.password"),
		TruststoreType:           str("ssl.truststore.type"),
		TruststoreLocation:       str("ssl.truststore.location"),
		TruststoreCertificates:   str("ssl.truststore.certificates"),
		TruststorePassword:       str("ssl.truststore.password"),
		ClientAuth:               str("ssl.client.auth"),
		EnabledProtocols:         list("ssl.enabled.protocols"),
		CipherSuites:             list("ssl.cipher.suites"),
		Protocol:                 str("ssl.protocol"),
		EndpointIdentification:   "https",
		ReloadInterval:           DefaultTLSReloadInterval,
	}
	if v, ok := get("ssl.key.password"); ok && v != "" {
		c.KeyPassword, c.HasKeyPassword = v, true
	}
	if v, ok := get("ssl.endpoint.identification.algorithm"); ok {
		c.EndpointIdentification = strings.TrimSpace(v)
	}
	if v := str("samsa.ssl.reload.interval.ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return SSLConfig{}, fmt.Errorf("%w: samsa.ssl.reload.interval.ms %q", ErrTLSConfig, v)
		}
		c.ReloadInterval = time.Duration(ms) * time.Millisecond
	}
	return c, nil
}

// material is what a configuration's files and texts held at one moment.
type material struct {
	cert  *tls.Certificate // nil: no key store
	roots *x509.CertPool   // nil: the system's roots
	sum   string           // of the bytes read: reload compares it
}

// loadMaterial reads the key store and trust store of c.
func (c *SSLConfig) loadMaterial() (material, error) {
	var m material
	var sum strings.Builder
	for _, t := range []struct{ key, v string }{{"ssl.keystore.type", c.KeystoreType}, {"ssl.truststore.type", c.TruststoreType}} {
		if t.v != "" && !strings.EqualFold(t.v, "PEM") {
			return m, fmt.Errorf("%w: %s=%s: Samsa reads PEM stores only (ssl.keystore.type=PEM)", ErrTLSConfig, t.key, t.v)
		}
	}
	if c.KeystorePassword != "" {
		return m, fmt.Errorf("%w: ssl.keystore.password cannot be specified with PEM format, only ssl.key.password", ErrTLSConfig)
	}
	if c.TruststorePassword != "" {
		return m, fmt.Errorf("%w: ssl.truststore.password cannot be specified with PEM format", ErrTLSConfig)
	}
	var certPEM, keyPEM []byte
	switch {
	case c.KeystoreLocation != "" && (c.KeystoreCertificateChain != "" || c.KeystoreKey != ""):
		return m, fmt.Errorf("%w: set ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both", ErrTLSConfig)
	case c.KeystoreLocation != "":
		b, err := os.ReadFile(c.KeystoreLocation)
		if err != nil {
			return m, fmt.Errorf("%w: ssl.keystore.location: %v", ErrTLSConfig, err)
		}
		certPEM, keyPEM = b, b
	case c.KeystoreCertificateChain != "" || c.KeystoreKey != "":
		if c.KeystoreCertificateChain == "" || c.KeystoreKey == "" {
			return m, fmt.Errorf("%w: ssl.keystore.certificate.chain and ssl.keystore.key go together", ErrTLSConfig)
		}
		certPEM, keyPEM = []byte(c.KeystoreCertificateChain), []byte(c.KeystoreKey)
	}
	if certPEM != nil {
		cert, err := keyPair(certPEM, keyPEM, c.KeyPassword, c.HasKeyPassword)
		if err != nil {
			return m, err
		}
		m.cert = &cert
		sum.Write(certPEM)
		sum.Write(keyPEM)
	}
	var trustPEM []byte
	switch {
	case c.TruststoreLocation != "" && c.TruststoreCertificates != "":
		return m, fmt.Errorf("%w: set ssl.truststore.location or ssl.truststore.certificates, not both", ErrTLSConfig)
	case c.TruststoreLocation != "":
		b, err := os.ReadFile(c.TruststoreLocation)
		if err != nil {
			return m, fmt.Errorf("%w: ssl.truststore.location: %v", ErrTLSConfig, err)
		}
		trustPEM = b
	case c.TruststoreCertificates != "":
		trustPEM = []byte(c.TruststoreCertificates)
	}
	if trustPEM != nil {
		pool, err := certPool(trustPEM)
		if err != nil {
			return m, err
		}
		m.roots = pool
		sum.WriteString("\x00trust\x00")
		sum.Write(trustPEM)
	}
	m.sum = sum.String()
	return m, nil
}

type tlsVersion struct {
	name string // Kafka's (Java's) name
	v    uint16
}

var tlsVersions = []tlsVersion{{"TLSv1", tls.VersionTLS10}, {"TLSv1.1", tls.VersionTLS11}, {"TLSv1.2", tls.VersionTLS12}, {"TLSv1.3", tls.VersionTLS13}}

// versionRange maps ssl.enabled.protocols to Go's minimum and maximum versions.
func (c *SSLConfig) versionRange() (uint16, uint16, error) {
	names := c.EnabledProtocols
	if len(names) == 0 {
		names = []string{"TLSv1.2", "TLSv1.3"}
	}
	var on [4]bool
	for _, n := range names {
		i := slices.IndexFunc(tlsVersions, func(v tlsVersion) bool { return strings.EqualFold(v.name, n) })
		if i < 0 {
			return 0, 0, fmt.Errorf("%w: ssl.enabled.protocols: %q is not supported (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3)", ErrTLSConfig, n)
		}
		on[i] = true
	}
	lo, hi := -1, -1
	for i, b := range on {
		if b {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	for i := lo; i <= hi; i++ {
		if !on[i] {
			return 0, 0, fmt.Errorf("%w: ssl.enabled.protocols %v leaves out %s: Go enables a contiguous range of versions", ErrTLSConfig, names, tlsVersions[i].name)
		}
	}
	return tlsVersions[lo].v, tlsVersions[hi].v, nil
}

// cipherSuites maps ssl.cipher.suites to Go's TLS 1.0-1.2 suite ids, and says whether
// TLS 1.3 suites were named. No names: Go's defaults, TLS 1.3 included.
func (c *SSLConfig) cipherSuites() ([]uint16, bool, error) {
	if len(c.CipherSuites) == 0 {
		return nil, true, nil
	}
	known := map[string]*tls.CipherSuite{}
	for _, s := range tls.CipherSuites() {
		known[s.Name] = s
	}
	insecure := map[string]bool{}
	for _, s := range tls.InsecureCipherSuites() {
		insecure[s.Name] = true
	}
	var ids []uint16
	tls13 := false
	for _, n := range c.CipherSuites {
		s, ok := known[n]
		switch {
		case ok && slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}):
			tls13 = true
		case ok:
			ids = append(ids, s.ID)
		case insecure[n]:
			return nil, false, fmt.Errorf("%w: ssl.cipher.suites: %s is insecure and not offered by Samsa", ErrTLSConfig, n)
		default:
			return nil, false, fmt.Errorf("%w: ssl.cipher.suites: %s is not a cipher suite Go implements", ErrTLSConfig, n)
		}
	}
	return ids, tls13, nil
}

// baseConfig is what server and client configurations share.
func (c *SSLConfig) baseConfig() (*tls.Config, error) {
	lo, hi, err := c.versionRange()
	if err != nil {
		return nil, err
	}
	suites, tls13, err := c.cipherSuites()
	if err != nil {
		return nil, err
	}
	if !tls13 && hi == tls.VersionTLS13 {
		hi = tls.VersionTLS12 // no TLS 1.3 suite named: as Java, no TLS 1.3
	}
	if len(c.CipherSuites) > 0 && len(suites) == 0 && lo < tls.VersionTLS13 {
		lo = tls.VersionTLS13 // only TLS 1.3 suites named
	}
	if lo > hi {
		return nil, fmt.Errorf("%w: ssl.cipher.suites %v leave no usable version of ssl.enabled.protocols", ErrTLSConfig, c.CipherSuites)
	}
	if c.Protocol != "" && !strings.EqualFold(c.Protocol, "TLS") &&
		!slices.ContainsFunc(tlsVersions[2:], func(v tlsVersion) bool { return strings.EqualFold(v.name, c.Protocol) }) {
		return nil, fmt.Errorf("%w: ssl.protocol %q (TLSv1.2, TLSv1.3, TLS)", ErrTLSConfig, c.Protocol)
	}
	return &tls.Config{
		MinVersion:   lo,
		MaxVersion:   hi,
		CipherSuites: suites,
		// Kafka's answers are large and streamed: full-size records from the start.
		DynamicRecordSizingDisabled: true,
	}, nil
}

// serverConfig builds the server side of c over m.
func (c *SSLConfig) serverConfig(m material) (*tls.Config, error) {
	if m.cert == nil {
		return nil, fmt.Errorf("%w: a TLS listener needs a key store (ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)", ErrTLSConfig)
	}
	cfg, err := c.baseConfig()
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(c.ClientAuth) {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("%w: ssl.client.auth %q (none, requested, required)", ErrTLSConfig, c.ClientAuth)
	}
	cfg.Certificates = []tls.Certificate{*m.cert}
	cfg.ClientCAs = m.roots
	return cfg, nil
}
