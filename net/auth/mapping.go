package auth

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Errors of ssl.principal.mapping.rules.
var (
	// ErrInvalidRule: the rules do not parse (a configuration error at start-up).
	ErrInvalidRule = errors.New("auth: invalid ssl.principal.mapping.rules")
	// ErrNoMatchingRule: no rule maps a certificate's name (Kafka's NoMatchingRule): the
	// connection's authentication fails.
	ErrNoMatchingRule = errors.New("auth: no ssl.principal.mapping.rules rule applies")
)

// MappingRules are Kafka's ssl.principal.mapping.rules (SslPrincipalMapper): a list of
// rules, tried in order, the first that maps a distinguished name wins:
//
//	DEFAULT                              the name unchanged
//	RULE:pattern/replacement/            if pattern matches the whole name, the name with
//	RULE:pattern/replacement/L           every match of pattern replaced (Java's
//	RULE:pattern/replacement/U           String.replaceAll), then lower- or upper-cased
//
// Rules are separated by commas (with optional spaces); a '/' inside a pattern or
// replacement is written '\/'. Replacements use Java's syntax: $1, ${name},
// '\' quoting the next character; a group number larger than the pattern's groups is a
// literal '$n', as Kafka escapes it.
//
// Patterns are Go regular expressions (RE2), which read Java's common syntax the same
// way; what RE2 lacks (backreferences, lookaround, possessive quantifiers) is refused
// when the rules are parsed. One difference remains: where a pattern can also match the
// empty string at the end of a name it matched whole (an unanchored ".*"), Java's
// replaceAll appends the replacement once more and Go does not.
type MappingRules struct {
	rules []mappingRule
	text  string
}

type mappingRule struct {
	isDefault   bool
	re          *regexp.Regexp
	full        *regexp.Regexp // re anchored at both ends
	replacement string         // Java syntax
	lower       bool
	upper       bool
	source      string
}

// ParseMappingRules parses ssl.principal.mapping.rules; empty text is DEFAULT (Kafka's
// default value). As in Kafka, empty rules between commas are ignored and anything
// after a rule's flags other than a comma is an error.
func ParseMappingRules(text string) (*MappingRules, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		t = "DEFAULT"
	}
	mr := &MappingRules{text: text}
	for {
		t = strings.TrimLeft(t, " \t\r\n\f\v")
		if t == "" {
			break
		}
		if t[0] == ',' { // an empty rule
			t = t[1:]
			continue
		}
		r, rest, err := parseRule(t)
		if err != nil {
			return nil, err
		}
		mr.rules = append(mr.rules, r)
		t = strings.TrimLeft(rest, " \t\r\n\f\v")
		if t != "" && t[0] != ',' {
			return nil, fmt.Errorf("%w: rule %q is followed by %q", ErrInvalidRule, r.source, t)
		}
	}
	if len(mr.rules) == 0 {
		return nil, fmt.Errorf("%w: %q has no rule", ErrInvalidRule, text)
	}
	return mr, nil
}

// parseRule reads one rule at the start of s and returns the rest.
func parseRule(s string) (mappingRule, string, error) {
	if rest, ok := strings.CutPrefix(s, "DEFAULT"); ok {
		return mappingRule{isDefault: true, source: "DEFAULT"}, rest, nil
	}
	body, ok := strings.CutPrefix(s, "RULE:")
	if !ok {
		return mappingRule{}, "", fmt.Errorf("%w: %q: want DEFAULT or RULE:pattern/replacement/[LU]", ErrInvalidRule, s)
	}
	pattern, body, ok := cutAtSlash(body)
	if !ok {
		return mappingRule{}, "", fmt.Errorf("%w: %q: no '/' after the pattern", ErrInvalidRule, s)
	}
	repl, body, ok := cutAtSlash(body)
	if !ok {
		return mappingRule{}, "", fmt.Errorf("%w: %q: no '/' after the replacement", ErrInvalidRule, s)
	}
	r := mappingRule{replacement: repl}
	switch {
	case strings.HasPrefix(body, "L"):
		r.lower, body = true, body[1:]
	case strings.HasPrefix(body, "U"):
		r.upper, body = true, body[1:]
	}
	r.source = s[:len(s)-len(body)]
	var err error
	if r.re, err = regexp.Compile(pattern); err != nil {
		return mappingRule{}, "", fmt.Errorf("%w: pattern %q: %v", ErrInvalidRule, pattern, err)
	}
	// \A(?:pattern)\z matches exactly when Java's Matcher.matches() does.
	if r.full, err = regexp.Compile(`\A(?:` + pattern + `)\z`); err != nil {
		return mappingRule{}, "", fmt.Errorf("%w: pattern %q: %v", ErrInvalidRule, pattern, err)
	}
	if err := r.checkReplacement(); err != nil {
		return mappingRule{}, "", err
	}
	return r, body, nil
}

// checkReplacement refuses ${name} references to groups the pattern does not have (Java
// throws at the first replacement; Samsa refuses the configuration).
func (r *mappingRule) checkReplacement() error {
	rep := r.replacement
	for i := 0; i < len(rep); i++ {
		switch {
		case rep[i] == '\\' && i+1 == len(rep):
			return fmt.Errorf("%w: replacement %q ends in an escape", ErrInvalidRule, rep)
		case rep[i] == '\\':
			i++
		case rep[i] == '$' && (i+1 == len(rep) || rep[i+1] != '{' && (rep[i+1] < '0' || rep[i+1] > '9')):
			return fmt.Errorf("%w: replacement %q: '$' must start a group reference ($1, ${name}); write \\$", ErrInvalidRule, rep)
		case rep[i] == '$' && rep[i+1] == '{':
			end := strings.IndexByte(rep[i+2:], '}')
			if end < 0 {
				return fmt.Errorf("%w: replacement %q: unclosed ${", ErrInvalidRule, rep)
			}
			if name := rep[i+2 : i+2+end]; r.re.SubexpIndex(name) < 0 {
				return fmt.Errorf("%w: replacement %q: no group named %q", ErrInvalidRule, rep, name)
			}
			i += 2 + end
		}
	}
	return nil
}

// cutAtSlash returns s up to the first '/' not escaped by a '\' and the rest after that
// '/'. Backslash pairs are kept as they are, as Kafka keeps them: the regular
// expression reads '\/' as '/', and so does the replacement.
func cutAtSlash(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// String is the rules as configured.
func (mr *MappingRules) String() string {
	if mr == nil {
		return "DEFAULT"
	}
	return mr.text
}

// Map applies the rules to a distinguished name (DistinguishedName's form). Nil rules
// are DEFAULT.
func (mr *MappingRules) Map(dn string) (string, error) {
	if mr == nil {
		return dn, nil
	}
	for i := range mr.rules {
		if out, ok := mr.rules[i].apply(dn); ok {
			return out, nil
		}
	}
	return "", fmt.Errorf("%w: %q (rules %s)", ErrNoMatchingRule, dn, mr.text)
}

func (r *mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.fullMatch(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, m := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:m[0]])
		r.expand(&b, dn, m)
		last = m[1]
	}
	b.WriteString(dn[last:])
	out := b.String()
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, true
}

// fullMatch is Java's Matcher.matches: the pattern matches all of s.
func (r *mappingRule) fullMatch(s string) bool { return r.full.MatchString(s) }

// expand writes the Java-syntax replacement for one match (submatch indexes m).
func (r *mappingRule) expand(b *strings.Builder, s string, m []int) {
	groups := len(m)/2 - 1
	rep := r.replacement
	for i := 0; i < len(rep); i++ {
		c := rep[i]
		switch {
		case c == '\\' && i+1 < len(rep):
			i++
			b.WriteByte(rep[i])
		case c == '$' && i+1 < len(rep) && rep[i+1] == '{':
			end := strings.IndexByte(rep[i+2:], '}')
			if end < 0 {
				b.WriteString(rep[i:])
				return
			}
			name := rep[i+2 : i+2+end]
			if g := r.re.SubexpIndex(name); g > 0 && m[2*g] >= 0 {
				b.WriteString(s[m[2*g]:m[2*g+1]])
			} else if g <= 0 {
				b.WriteString(rep[i : i+3+end])
			}
			i += 2 + end
		case c == '$' && i+1 < len(rep) && rep[i+1] >= '0' && rep[i+1] <= '9':
			// Java reads the first digit, then more digits while the number stays a
			// valid group; a first digit beyond the groups is literal (Kafka escapes it).
			g := int(rep[i+1] - '0')
			if g > groups {
				b.WriteByte('$')
				continue
			}
			j := i + 2
			for j < len(rep) && rep[j] >= '0' && rep[j] <= '9' {
				n, _ := strconv.Atoi(rep[i+1 : j+1])
				if n > groups {
					break
				}
				g = n
				j++
			}
			if m[2*g] >= 0 {
				b.WriteString(s[m[2*g]:m[2*g+1]])
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
}
