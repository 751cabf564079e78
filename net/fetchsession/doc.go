// Package fetchsession owns a broker's incremental fetch sessions (KIP-227): Kafka's
// FetchSessionCache and FetchSession, apart from the Fetch handler (net/kafka's
// 01_fetch.go), which opens a session for each request (Cache.Open), reads the
// partitions it serves (Session.Collect) and tells it what the answer carried
// (Part.CarryLocked) and which partitions had nothing to send (Session.Quiet).
//
// A session remembers the partitions a client fetches and, per partition, the fetch
// offset and limit it asked for and the HW, LSO and log start last sent. An
// incremental request names only what changed (new partitions, new offsets, forgotten
// partitions); its answer carries only partitions with records, an error or a changed
// HW / LSO / log start.
//
//	SessionID  SessionEpoch   meaning
//	0          -1             sessionless full fetch
//	id         -1             close session id, sessionless full fetch
//	0 or id    0              (close id,) open a new session with the request's
//	                          partitions: full fetch, answer carries the new id
//	id         n > 0          incremental fetch in session id; n must be the
//	                          session's epoch (INVALID_FETCH_SESSION_EPOCH), id must
//	                          exist (FETCH_SESSION_ID_NOT_FOUND); the epoch then
//	                          becomes n+1 (after MaxInt32: 1)
//
// The cache holds at most max sessions (net/kafka: 1,000); a new session evicts the
// least recently used one when it is full (Kafka prefers evicting small, idle
// sessions). A session is keyed by partition name for requests before v13 and by
// topic id from v13 on; switching within a session is FETCH_SESSION_TOPIC_ID_ERROR.
//
// # Quiet partitions
//
// An idle follower's incremental fetch names nothing, yet serving it would read every
// partition of the session (3,333 per follower for 10,000 partitions over three
// nodes) every replica.fetch.wait.max.ms. So a partition whose answer had nothing to
// send, its follower at the log end and in the ISR, goes quiet (Session.Quiet):
// replication is told (replication.Partition.FollowerQuiet: the follower's fetches
// keep counting as caught-up fetches at that offset, through the session's clock,
// Session.SetClock), the partition is listed under its log in the cache's quiet list,
// and requests leave it out. It wakes when the request names it, when its log changes
// (Cache.Wake, from replication's HighWatermarkMoved and LeaderAppended hooks), when
// the broker's metadata image changes (Collect is given another image), and every
// rescan (which catches what no hook reports: a log start moved by retention or
// DeleteRecords). A woken partition is served by the session's parked long poll
// (Session.Park), which it completes, or by the next request. A quiet partition that
// wakes any other way ends its replica's quiet state (FollowerAwake). The scan of a
// request is then a flag test per partition; what is read, resolved and watched is
// the partitions that changed.
//
// A consumer's session does the same with the partitions this broker leads: a
// consumer reads up to the HW (read_committed: the LSO), so a partition whose answer
// had nothing to send, its fetch offset at that end, goes quiet, listed in the
// consumers' list, which only a moved HW wakes (Cache.Wake with hwMoved: an append
// the HW has not passed gives a consumer nothing, and an LSO moves only when the HW
// passes a marker). A follower's HW is not announced, so a consumer fetching from a
// follower (KIP-392) keeps reading every partition. A consumer's session over the
// 2,500 partitions of a 10,000-partition topic with four members otherwise read each
// of them at every fetch: half the broker's CPU at 5 records a second per partition.
//
// # Invariants and locks
//
//  1. A session's parts are exactly its awake list plus its quiet parts: a part is on
//     the awake list (at the index it records) if and only if it is neither quiet nor
//     removed, and nquiet counts the quiet ones (Cache.Check verifies it).
//  2. A quiet part is listed under its log in its session's quiet list, and only
//     then; a session taken out of the cache (closed, evicted, Clear) wakes its quiet
//     parts, so the lists do not keep a part of a session that is gone.
//  3. A follower's quiet part names the replica FollowerQuiet agreed for it, and
//     waking it any way but by a log change calls FollowerAwake on that replica.
//
// Lock order: Cache.mu, then Session's lock, then a quiet list's shard; a replica's
// locks (FollowerQuiet, FollowerAwake) are taken under the Session's lock or none.
// Wake takes a shard, releases it, then each session's lock. Every method is safe for
// concurrent use; the methods ending in Locked need the Session's lock (Session.Lock).
package fetchsession
