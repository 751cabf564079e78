package kafkaprops

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidJAAS is returned for a sasl.jaas.config that does not parse.
var ErrInvalidJAAS = errors.New("auth: invalid sasl.jaas.config")

// Kafka's login modules.
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// JAAS is one login module entry of a sasl.jaas.config value:
//
//	<login module class> <required|requisite|sufficient|optional> (key=value)* ;
//
// e.g. org.apache.kafka.common.security.plain.PlainLoginModule required
// username="admin" password="admin-secret" user_admin="admin-secret";
// Values are quoted ("a b", with \" and \\ escapes) or bare words. On a broker the
// username and password options are what the broker sends as a client (inter-broker and
// controller connections); user_<name> options list PLAIN users.
type JAAS struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// Users returns the user_<name> options as name → password.
func (j JAAS) Users() map[string]string {
	out := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			out[name] = v
		}
	}
	return out
}

// ParseJAAS parses a sasl.jaas.config value. Kafka requires exactly one login module in
// it; so does Samsa.
func ParseJAAS(s string) (JAAS, error) {
	p := jaasParser{s: s}
	var j JAAS
	var err error
	if j.LoginModule, err = p.word(); err != nil {
		return JAAS{}, err
	}
	if j.Flag, err = p.word(); err != nil {
		return JAAS{}, err
	}
	switch strings.ToLower(j.Flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return JAAS{}, fmt.Errorf("%w: control flag %q", ErrInvalidJAAS, j.Flag)
	}
	j.Options = map[string]string{}
	for {
		p.skipSpace()
		if p.peek() == ';' {
			p.i++
			break
		}
		if p.eof() {
			return JAAS{}, fmt.Errorf("%w: missing ';'", ErrInvalidJAAS)
		}
		key, err := p.word()
		if err != nil {
			return JAAS{}, err
		}
		p.skipSpace()
		if p.peek() != '=' {
			return JAAS{}, fmt.Errorf("%w: option %q without '='", ErrInvalidJAAS, key)
		}
		p.i++
		p.skipSpace()
		val, err := p.value()
		if err != nil {
			return JAAS{}, err
		}
		j.Options[key] = val
	}
	p.skipSpace()
	if !p.eof() {
		return JAAS{}, fmt.Errorf("%w: more than one login module", ErrInvalidJAAS)
	}
	return j, nil
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) eof() bool { return p.i >= len(p.s) }

func (p *jaasParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *jaasParser) skipSpace() {
	for !p.eof() && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// word reads a bare word: letters, digits and . _ - $.
func (p *jaasParser) word() (string, error) {
	p.skipSpace()
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-$", c) >= 0 {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		return "", fmt.Errorf("%w: expected a word at offset %d", ErrInvalidJAAS, start)
	}
	return p.s[start:p.i], nil
}

func (p *jaasParser) value() (string, error) {
	if p.peek() != '"' {
		return p.word()
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), nil
		case '\\':
			if p.eof() {
				return "", fmt.Errorf("%w: unterminated escape", ErrInvalidJAAS)
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted value", ErrInvalidJAAS)
}
