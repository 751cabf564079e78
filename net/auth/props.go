package auth

import "github.com/samsa-broker/samsa/internal/kafkaprops"

// The configuration text parsers live in internal/kafkaprops (clients use them too);
// these names keep net/auth's callers as they were.

// JAAS is a parsed sasl.jaas.config (kafkaprops.JAAS).
type JAAS = kafkaprops.JAAS

// The login modules of Kafka's SASL mechanisms.
const (
	PlainLoginModule = kafkaprops.PlainLoginModule
	ScramLoginModule = kafkaprops.ScramLoginModule
)

// ErrInvalidJAAS is returned for a sasl.jaas.config that does not parse.
var ErrInvalidJAAS = kafkaprops.ErrInvalidJAAS

// ParseJAAS parses a sasl.jaas.config value (kafkaprops.ParseJAAS).
func ParseJAAS(s string) (JAAS, error) { return kafkaprops.ParseJAAS(s) }

// ReadProperties reads a Java properties file (kafkaprops.ReadProperties).
func ReadProperties(path string) ([][2]string, error) { return kafkaprops.ReadProperties(path) }
