// Package kafkaprops reads Kafka's configuration text as its tools write it: Java
// properties files (ReadProperties), sasl.jaas.config values (ParseJAAS), and client
// properties (--command-config: security.protocol, sasl.*, ssl.*) turned into franz-go
// options (ClientOptions). It imports nothing of the broker, so that clients
// (samsa-bench, the samsa command's admin commands) and the broker (net/auth's
// listeners, net/node's configuration) share one parser.
package kafkaprops
