// Package auth owns authentication: SASL server mechanisms (PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512) as state machines with no I/O, the per-connection SASL state of
// Kafka's SaslServerAuthenticator (which requests may come before authentication,
// handshake versions, re-authentication, session expiry), Kafka's principals, and the
// mapping of a TLS client certificate to a principal (ssl.principal.mapping.rules).
//
// It reads no sockets and no clocks: the protocol layer hands it the bytes of
// SaslHandshake and SaslAuthenticate requests (or the raw tokens after a version-0
// handshake) and the time, and sends what it returns. Credentials come from a
// CredentialStore (the metadata image's SCRAM records: salt, iterations, StoredKey and
// ServerKey, never a password).
//
// Conformance points that Kafka's CVEs taught, each tested:
//   - SCRAM: the nonce of the client-final message must equal the nonce of the
//     server-first message, client part and server part (CVE-2024-56128); the one
//     other form accepted is librdkafka's before 2.6.1 (its client nonce, then the
//     server-first nonce whole: librdkafka#4895), as Kafka 3.8.1 to 3.9 accept it.
//   - PLAIN and SCRAM: an authorization id different from the authentication id is
//     refused (CVE-2017-12610 class: a client must not act as someone else).
//   - Secrets (proofs, stored keys, PLAIN password digests) are compared in constant
//     time; an unknown user costs the same work and fails with the same message as a
//     wrong password, at the same step (SCRAM answers an unknown user with a fake
//     salt derived from a per-process secret, as RFC 5802 section 9 suggests).
//   - Iterations are bounded (4096 to 16384, Kafka's), and every message is bounded
//     in size before it is parsed.
package auth
