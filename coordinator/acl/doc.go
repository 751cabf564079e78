// Package acl owns authorisation: Kafka's StandardAuthorizer semantics over the ACLs of
// a metadata image (coordinator/metadata's AccessControlEntryRecords), the validation
// and filters of CreateAcls, DescribeAcls and DeleteAcls, and the table of what each
// Kafka API must be authorised for (apis.go), as data the protocol layer consults.
//
// A decision (Authorizer.Authorize), as Kafka's StandardAuthorizerData.authorize makes it:
//
//  1. A principal listed in super.users is allowed everything.
//  2. The ACLs that apply to a resource (type T, name N) are those of type T that are
//     LITERAL with name N, LITERAL with name "*", or PREFIXED with a name N starts with.
//  3. Of those, an ACL matches the request when its principal is the request's or
//     "User:*", its host is "*" or the client's address, and its operation is ALL, the
//     requested one, or (for ALLOW ACLs only) implies it: READ, WRITE, DELETE and ALTER
//     imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY of READ does not
//     deny DESCRIBE.
//  4. Any matching DENY: denied. Else any matching ALLOW: allowed. Else, when no ACL at
//     all applies to the resource (rule 2, whoever it names), allow.everyone.if.no.acl.found
//     decides (default false: denied); when some ACL applies but none matched, denied.
//
// Index (built once per ACL set, an *metadata.ACLSet, shared by the images until an ACL
// record changes it):
//
//	byType[resource type] ─▶ literal  map[name]   ─▶ group
//	                         wildcard (name "*")   ─▶ group
//	                         prefixed map[prefix]  ─▶ group   + the distinct prefix lengths
//	group: byPrincipal map[principal] ─▶ []entry{operation, permission, host}
//
// A check costs one literal lookup, one wildcard group, and one prefix lookup per
// distinct prefix length not longer than the name, each followed by two principal
// lookups (the principal and "User:*"); it never scans ACLs of other resources or
// principals, so it does not slow down as ACLs are added (BenchmarkAuthorize: 10,000).
//
// Host matching differs from Kafka's in one way: Kafka compares the ACL's host string
// with Java's InetAddress.getHostAddress() of the client; Samsa compares addresses, so
// "::1" and "0:0:0:0:0:0:0:1" (Java's form) both match an IPv6 loopback client, and an
// IPv4-mapped IPv6 client matches its IPv4 form. A host that is not an IP address (or
// "*") never matches, as in Kafka.
//
// An Authorizer is safe for concurrent use; Update swaps its index atomically, so a
// check sees either the old ACLs or the new ones, never a mix.
package acl
