// Package sharesession owns a broker's share sessions (KIP-932): Kafka's
// ShareSessionCache and ShareSession, apart from the ShareFetch and ShareAcknowledge
// handlers (net/kafka's 78_share_fetch.go, 79_share_acknowledge.go), which open,
// move on and close a member's session per request (Cache.Open, Cache.Next,
// Cache.Check, Cache.Close) and release what a member holds on the partitions that
// leave it. A session is tied to the connection that opened it (Cache.CloseConn). The
// codes returned are Kafka's: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
// SHARE_SESSION_LIMIT_REACHED.
package sharesession
