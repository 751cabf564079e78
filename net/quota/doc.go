// Package quota owns the broker's client quotas: the byte rates of producers and
// consumers (KIP-13, KIP-55, KIP-219), the request time of every client (KIP-124) and
// the controller mutation rate (KIP-599). It is Kafka's ClientQuotaManager,
// ClientRequestQuotaManager and ControllerMutationQuotaManager: it measures what a
// client did and says how long the client must wait; the protocol layer (net/kafka)
// puts that time in the answer's throttle_time_ms and mutes the connection for it.
// The quotas themselves are the ClientQuotaRecords of the metadata image
// (coordinator/metadata's ClientQuotas), passed in by the caller with each call, so
// an altered quota acts at the next request.
//
// # Byte rates and request time
//
//	Produce (v0+): the request's size is recorded against producer_byte_rate
//	Fetch (consumers, not followers): the response's size against consumer_byte_rate
//	    ─▶ rate over the window (quota.window.num samples of quota.window.size.seconds)
//	    ─▶ over the quota: throttle = (rate − quota) / quota × window, at most one sample
//	       window; the answer leaves at once with throttle_time_ms set, and the
//	       connection is muted (transport.Mute: its next request is not read) for that
//	       long, so a client that ignores the throttle time is held back anyway
//
// The quota of a request is the first entity, in Kafka's precedence, that sets the key:
//
//	user=U,client-id=C  user=U,client-id=<default>  user=U
//	user=<default>,client-id=C  user=<default>,client-id=<default>  user=<default>
//	client-id=C  client-id=<default>
//
// and its rate is shared by every connection the entity covers: a quota on user=U
// counts all of U's clients together, a default quota counts each user (or client id)
// on its own. U is the authenticated user (the name of the User: principal), or
// ANONYMOUS on a listener without authentication (ClientOf). The ip entity's
// connection_creation_rate is the transport's (transport.ConnLimits.IPCreationRate,
// which IPConnectionRate answers), enforced at accept.
//
// request_percentage (KIP-124) is the share of one handler thread a client may use:
// the time each request spends in its handler on the read path is recorded in units
// of 1% of a second (RequestQuota.Record); a request whose client is over its quota
// when it arrives gets that throttle time in its answer (RequestQuota.Throttle: any
// API with a throttle_time_ms) and mutes the connection. Exempt, as in Kafka (the
// caller decides): ApiVersions, the SASL APIs, follower fetches and the inter-broker
// WriteTxnMarkers.
//
// A throttled Fetch is answered as KafkaApis does: no partitions and
// throttle_time_ms, its bytes taken back out of the rate (Manager.Fetch); and a
// consumer's fetch is capped at quota × (samples − 1) × sample window bytes
// (Manager.FetchMaxBytes, Kafka's getMaxValueInQuotaWindow).
//
// Differences from Kafka: requests of versions before KIP-219 are not delayed by the
// broker (the connection is muted all the same, which bounds the rate). The request
// time counts the handler's synchronous part only (not a forwarded request's wait for
// the controller, nor the network threads' time, which Kafka adds).
//
// # Controller mutations
//
// controller_mutation_rate (KIP-599), as Kafka's ControllerMutationQuotaManager:
// CreateTopics, CreatePartitions and DeleteTopics charge the partitions they create or
// delete, topic by topic in request order, to a token bucket per quota entity (the
// same entity precedence as the byte rates):
//
//	the bucket holds up to quota × quota.window.num × quota.window.size.seconds tokens
//	(it starts full) and refills at quota tokens a second
//	strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a topic is
//	    accepted while the bucket is not in debt (so one large request passes and
//	    takes it below zero, unthrottled), else answered THROTTLING_QUOTA_EXCEEDED,
//	    and the answer carries the time until the debt is repaid as throttle_time_ms
//	permissive (older versions): every topic is accepted and charged; an answer that
//	    leaves the bucket in debt carries that time as throttle_time_ms
//
// and a throttled answer mutes the connection for its throttle time, as the byte
// rates do. ValidateOnly requests mutate nothing and are not charged; neither are
// topics the broker's image already shows will fail (a topic that exists, for
// CreateTopics; an unknown topic or a count not above the current one, for
// DeleteTopics and CreatePartitions), which Kafka's controller refuses before it
// charges the quota.
//
// Difference from Kafka: the buckets are each broker's, charged before the request
// is forwarded, where Kafka's KRaft controller keeps one per entity for the cluster;
// a client spreading its requests over n brokers gets n times its rate.
//
// # State and metrics
//
// A Manager keeps one sampled rate per (quota key, entity) and one token bucket per
// entity with a controller_mutation_rate, created on first use and dropped after an
// hour unused (Kafka's inactive sensor expiry), so clients that come and go do not
// grow it for ever. Every method is safe for concurrent use; the one lock is held
// only to read or update a rate or bucket. It exports
//
//	samsa_quota_throttle_time_ms_total{key}     throttle time given, per quota key [throttle-time]
//	samsa_quota_throttled_responses_total{key}  answers sent with a throttle time, per quota key
package quota
