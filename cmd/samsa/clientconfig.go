package main

// --command-config FILE: the Kafka client properties of the operator commands, as
// Kafka's tools read them (kafka-topics.sh --command-config, kafka-acls.sh
// --command-config, ...), turned into franz-go client options.
//
//	security.protocol        PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
//	sasl.mechanism           PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (sasl.mechanisms, librdkafka's
//	                         spelling, too)
//	sasl.jaas.config         Kafka's PlainLoginModule or ScramLoginModule with username="..."
//	                         password="..."; or sasl.username and sasl.password
//	ssl.truststore.location  PEM file of the CAs that sign the brokers' certificates
//	                         (ssl.truststore.type PEM; ssl.truststore.certificates inline;
//	                         ssl.ca.location, librdkafka's spelling); default: the system's
//	ssl.keystore.location    PEM file with the client's private key and certificate chain,
//	                         for ssl.client.auth (ssl.keystore.type PEM; unencrypted keys)
//	ssl.endpoint.identification.algorithm   https (default: check the broker's name) or
//	                         empty (do not)
//	client.id                the client id the broker sees
//
// Other keys a Kafka admin client knows (request.timeout.ms, retries, ...) are
// accepted and ignored with a warning, so one file serves Kafka's tools and these; a
// key of a mechanism or store type it cannot use (GSSAPI, OAUTHBEARER, JKS, PKCS12) is
// an error.

import (
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/internal/kafkaprops"
)

// loadClientConfig reads the properties file at path (kafkaprops.ClientOptions); warn gets
// a line per ignored key.
func loadClientConfig(path string, warn io.Writer) ([]kgo.Opt, error) {
	kvs, err := readProperties(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	opts, err := kafkaprops.ClientOptions(kvs, func(key string) {
		fmt.Fprintf(warn, "samsa: --command-config: %s is not used by samsa's commands; ignored\n", key)
	})
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return opts, nil
}
