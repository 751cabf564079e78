package configs

import "testing"

func TestListenerPrefixedKeys(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		known, bad bool
	}{
		{"listener.name.sasl_ssl.ssl.keystore.location", "/k.pem", true, false},
		{"listener.name.sasl_ssl.plain.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`, true, false},
		{"listener.name.external.sasl.enabled.mechanisms", "PLAIN", true, false},
		{"listener.name.external.sasl.enabled.mechanisms", "GSSAPI", true, true},
		{"listener.name.external.log.retention.ms", "1", false, false},
		{"listener.name.x", "1", false, false},
	} {
		_, known, err := ValidateBroker(tc.key, tc.value)
		if known != tc.known || (err != nil) != tc.bad {
			t.Errorf("%s=%s: known %v err %v", tc.key, tc.value, known, err)
		}
	}
}
