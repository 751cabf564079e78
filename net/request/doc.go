// Package request is a Kafka request between the transport and the protocol adapter
// (Kafka's RequestChannel.Request and its RequestMetrics): Parse turns a frame into a
// Request against a listener's table of served APIs (header, key and version, body
// decoded by kmsg or by the API's own decoder), or closes its connection as a bad
// request; the Request is answered exactly once, from any goroutine (Respond,
// RespondRaw, NoResponse, CloseConn), with the edits the listener set (an
// authorisation's amendment, a quota's throttle time) applied, and its times and
// error codes recorded in the listener's Metrics (with ListenerConns, the open
// connections per listener name).
//
// It knows no API's meaning and holds no broker state: net/kafka's handler tables,
// handlers, listener security and quotas sit above it; net/wire's header codec below.
//
//	frame ─▶ Parse: wire.ParseFixedHeader ─▶ Lookup(key) ─▶ version check
//	      ─▶ wire.ParseHeaderRest ─▶ kmsg decode (unless Spec.Raw) ─▶ *Request
//	      ─▶ the listener's handler ─▶ r.Respond(resp): amend, throttle, count errors,
//	         encode header+body into a pooled buffer, Ticket.Respond
package request
