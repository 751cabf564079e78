// Package wire holds the parts of the Kafka wire format the broker writes by hand,
// below the protocol adapter (net/kafka) and beside kmsg, which encodes and decodes
// every body: the request header (parsed before the body is decoded, so that a bad
// key or version closes the connection without decoding anything), the response
// header, the Fetch response framed around file ranges for sendfile (FetchFrame), and
// the error codes of any answer, found once per response type by reflection for the
// request metrics (ErrorCodes), and Kafka's messages for error codes (ErrorMessage).
// No I/O of its own, no state beyond pools and caches.
package wire
