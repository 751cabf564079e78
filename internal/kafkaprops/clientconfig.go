package kafkaprops

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientProps are parsed client properties.
type clientProps struct {
	protocol       string // upper case
	mechanism      string // upper case
	user           string
	password       string
	trust          []byte // PEM
	keystore       []byte // PEM: key and chain
	verifyHostname bool
	clientID       string
}

// ClientOptions turns Kafka client properties (kafka-*.sh --command-config's, later
// keys winning) into franz-go options: security.protocol, sasl.mechanism,
// sasl.jaas.config or sasl.username/sasl.password, PEM trust and key stores
// (ssl.truststore.location, ssl.truststore.certificates, ssl.ca.location,
// ssl.keystore.location), ssl.endpoint.identification.algorithm and client.id.
// ignored is called with each other key (a Kafka client key these options do not
// use); a key of a mechanism or store type franz-go cannot use here (GSSAPI,
// OAUTHBEARER, JKS, PKCS12, encrypted keys) is an error.
func ClientOptions(kvs [][2]string, ignored func(key string)) ([]kgo.Opt, error) {
	p, err := parseClientProps(kvs, ignored)
	if err != nil {
		return nil, err
	}
	return p.opts()
}

// parseClientProps interprets the client keys of kvs (later keys win).
func parseClientProps(kvs [][2]string, ignored func(string)) (*clientProps, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv[0]] = strings.TrimSpace(kv[1])
	}
	p := &clientProps{protocol: "PLAINTEXT", verifyHostname: true}
	readFile := func(key string) ([]byte, error) {
		b, err := os.ReadFile(m[key])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		return b, nil
	}
	var err error
	for k, v := range m {
		switch k {
		case "security.protocol":
			p.protocol = strings.ToUpper(v)
			switch p.protocol {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			default:
				return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v)
			}
		case "sasl.mechanism", "sasl.mechanisms":
			p.mechanism = strings.ToUpper(v)
		case "sasl.jaas.config":
			j, err := ParseJAAS(v)
			if err != nil {
				return nil, fmt.Errorf("sasl.jaas.config: %w", err)
			}
			if j.LoginModule != PlainLoginModule && j.LoginModule != ScramLoginModule {
				return nil, fmt.Errorf("sasl.jaas.config: login module %s: want %s or %s", j.LoginModule, PlainLoginModule, ScramLoginModule)
			}
			if u, ok := j.Options["username"]; ok && m["sasl.username"] == "" {
				p.user = u
			}
			if pw, ok := j.Options["password"]; ok && m["sasl.password"] == "" {
				p.password = pw
			}
		case "sasl.username":
			p.user = v
		case "sasl.password":
			p.password = v
		case "ssl.truststore.type", "ssl.keystore.type":
			if !strings.EqualFold(v, "PEM") {
				return nil, fmt.Errorf("%s %s: only PEM stores are read", k, v)
			}
		case "ssl.truststore.location", "ssl.ca.location":
			if p.trust, err = readFile(k); err != nil {
				return nil, err
			}
		case "ssl.truststore.certificates":
			p.trust = []byte(v)
		case "ssl.keystore.location":
			if p.keystore, err = readFile(k); err != nil {
				return nil, err
			}
		case "ssl.key.password", "ssl.keystore.password":
			if v != "" {
				return nil, fmt.Errorf("%s: encrypted client keys are not read; give an unencrypted PEM key", k)
			}
		case "ssl.truststore.password":
			// PEM trust stores have no password (Kafka ignores it for PEM too).
		case "ssl.endpoint.identification.algorithm":
			p.verifyHostname = strings.EqualFold(v, "https")
		case "client.id":
			p.clientID = v
		default:
			if ignored != nil {
				ignored(k)
			}
		}
	}
	sasled := strings.HasPrefix(p.protocol, "SASL_")
	if sasled {
		if p.mechanism == "" {
			p.mechanism = "GSSAPI" // Kafka's default, which is refused below
		}
		switch p.mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, fmt.Errorf("sasl.mechanism %s: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", p.mechanism)
		}
		if p.user == "" {
			return nil, errors.New("security.protocol " + p.protocol + " needs a user: sasl.jaas.config with username and password, or sasl.username and sasl.password")
		}
	}
	return p, nil
}

// opts turns the properties into client options.
func (p *clientProps) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if p.clientID != "" {
		opts = append(opts, kgo.ClientID(p.clientID))
	}
	if p.protocol == "SSL" || p.protocol == "SASL_SSL" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if len(p.trust) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(p.trust) {
				return nil, errors.New("the trust store holds no PEM certificate")
			}
			cfg.RootCAs = pool
		}
		if len(p.keystore) > 0 {
			cert, err := keyPairFromPEM(p.keystore)
			if err != nil {
				return nil, fmt.Errorf("ssl.keystore.location: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		if !p.verifyHostname {
			// Kafka's ssl.endpoint.identification.algorithm= (empty): the chain is
			// still checked against the trust store, the broker's name is not.
			cfg.InsecureSkipVerify = true
			roots := cfg.RootCAs
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the broker sent no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if strings.HasPrefix(p.protocol, "SASL_") {
		var m sasl.Mechanism
		switch p.mechanism {
		case "PLAIN":
			m = plain.Auth{User: p.user, Pass: p.password}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: p.user, Pass: p.password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: p.user, Pass: p.password}.AsSha512Mechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// keyPairFromPEM reads a private key and its certificate chain from one PEM file (in
// any order, as Kafka's PEM key store holds them).
func keyPairFromPEM(b []byte) (tls.Certificate, error) {
	var certs, keys []byte
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if strings.Contains(blk.Type, "PRIVATE KEY") {
			keys = append(keys, pem.EncodeToMemory(blk)...)
		} else if blk.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(blk)...)
		}
	}
	if len(keys) == 0 || len(certs) == 0 {
		return tls.Certificate{}, errors.New("want a PEM private key and certificate")
	}
	return tls.X509KeyPair(certs, keys)
}
