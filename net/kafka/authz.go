package kafka

import (
	"log/slog"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/transport"
)

// Authorisation of every request of a SecureListener with an authorizer, before its
// handler runs, following coordinator/acl's per-API table (acl.APIs). Handlers know
// nothing of it: a request is
//
//   - passed as it is when the principal may do all it asks (super users always);
//   - answered here, without its handler, when it may do none of it, or when the
//     refusal is of the whole request (a cluster action, the request's group or
//     transactional id): the answer carries Kafka's code on every item
//     (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
//     CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
//   - for a change or an expensive read of several items (Produce, Fetch, CreateTopics,
//     DeleteTopics, ...), split: the refused items are taken out of the request (Raw
//     APIs' bodies re-encoded), the handler serves the rest, and Request.amend puts
//     the refused items back into the answer with their error;
//   - for other reads of several items (ListOffsets, OffsetFetch, DescribeGroups, ...),
//     served whole and amended: refused items get their error and lose their data,
//     items the principal may not see (Metadata of all topics, ListGroups, ...) are
//     removed (Kafka's filtering of unauthorised topics).
//
// The rules are in authz_rules.go and authz_rules_more.go; rows that name only the
// cluster are decided by clusterRow. An API of the broker's table with a row but no
// rule is allowed to super users only; other principals have the connection closed
// (fail closed), which is logged. KIP-430's authorized-operations fields of Metadata,
// DescribeCluster and DescribeGroups are filled from the ACLs (authz_listener.go). Not
// done yet: CreateTopics does not hide the configs of a created topic the principal
// may not DescribeConfigs.

// authzCheck is the rule of one API: it reports whether the handler runs (r possibly
// split and amended) or the request was answered here.
type authzCheck func(az *authz) bool

// authzRules are the APIs with their own rule (the others: cluster-only rows, below).
var authzRules = map[int16]authzCheck{}

// authz is one request's authorisation.
type authz struct {
	log *slog.Logger
	r   *Request
	a   *acl.Authorizer
	ctx acl.Context
	im  *metadata.Image
}

// authorize decides r (see above). It reports whether r's handler is to run.
func (b *Broker) authorize(r *Request) bool {
	cs := r.sec
	if cs == nil || cs.l.sec.Authorizer == nil {
		return true
	}
	az := &authz{log: b.log, r: r, a: cs.l.sec.Authorizer, ctx: cs.ctx}
	_, az.im = b.Image()
	// The authorizer follows the image the broker answers from: Update is a pointer
	// comparison unless the ACLs changed, when the first request after the change
	// rebuilds the index.
	az.a.Update(az.im.ACLs())
	if az.a.IsSuperUser(az.ctx.Principal) {
		return true
	}
	return az.decide()
}

// decide applies the request's row and rule (the principal is not a super user).
func (az *authz) decide() bool {
	r := az.r
	row, ok := acl.Lookup(r.Header.Key)
	switch {
	case !ok:
		return az.closeUnknown("no authorisation row")
	case row.None:
		return true
	}
	if rule, ok := authzRules[r.Header.Key]; ok {
		return rule(az)
	}
	if code, ok := az.clusterRow(row); ok {
		if code == 0 {
			return true
		}
		az.refuseAll(code)
		return false
	}
	return az.closeUnknown("no authorisation rule for its resources yet")
}

func (az *authz) closeUnknown(why string) bool {
	az.log.Warn("closing connection: request refused, "+why, "api", apiName(az.r.Header.Key), "principal", az.ctx.Principal)
	az.r.CloseConn()
	return false
}

// clusterRow evaluates a row whose requirements are all on the cluster and always
// apply: the code of the refusal (0: allowed). ok is false for other rows.
func (az *authz) clusterRow(row *acl.API) (code int16, ok bool) {
	for _, q := range row.Requirements {
		if q.Scope != acl.ScopeCluster || q.When != acl.Always {
			return 0, false
		}
	}
	tryNext := false
	for _, q := range row.Requirements {
		allowed := az.cluster(q.Operation)
		if q.OnDenied == acl.TryNext {
			if allowed {
				return 0, true
			}
			tryNext = true
			continue
		}
		if !allowed {
			return q.Error, true
		}
		tryNext = false
	}
	_ = tryNext
	return 0, true
}

func (az *authz) allowed(op metadata.ACLOperation, rt metadata.ACLResourceType, name string) bool {
	return az.a.Authorize(az.ctx, acl.Action{Operation: op, Resource: rt, Name: name})
}

func (az *authz) cluster(op metadata.ACLOperation) bool {
	return az.allowed(op, metadata.ACLResourceCluster, acl.ClusterName)
}

func (az *authz) topic(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceTopic, name)
}

func (az *authz) group(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceGroup, name)
}

func (az *authz) txnID(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceTransactionalID, name)
}

// topicName is a topic's name from its name or (newer versions) its id; "" for an id
// the image does not know (the handler answers UNKNOWN_TOPIC_ID).
func (az *authz) topicName(name string, id [16]byte) string {
	if name != "" || id == [16]byte{} {
		return name
	}
	if t, ok := az.im.TopicByID(metadata.UUID(id)); ok {
		return t.Name
	}
	return ""
}

// topicOK reports whether op is allowed on the topic named name or id; a topic id the
// image does not know is passed to the handler (nothing to protect, it answers
// UNKNOWN_TOPIC_ID).
func (az *authz) topicOK(op metadata.ACLOperation, name string, id [16]byte) bool {
	n := az.topicName(name, id)
	if n == "" && id != [16]byte{} {
		return true
	}
	return az.topic(op, n)
}

// refuseAll answers the whole request with code on every item: the controller's error
// shape for the APIs it serves, else the response's top-level error code. A response
// with neither closes the connection.
func (az *authz) refuseAll(code int16) {
	req := az.r.Body
	msg := kerr.ErrorForCode(code).Error()
	var resp kmsg.Response
	if controller.Serves(req) {
		resp = controller.ErrorResponse(req, code, msg)
	} else {
		resp = az.r.ResponseKind()
		if !setTopErrorCode(resp, code) {
			az.closeUnknown("a refusal this response cannot carry")
			return
		}
	}
	az.r.Respond(resp)
}

// setTopErrorCode sets resp's top-level ErrorCode field, if it has one.
func setTopErrorCode(resp kmsg.Response, code int16) bool {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return false
	}
	f.SetInt(int64(code))
	return true
}

// decode decodes a Raw API's body for its authorisation (nil when it does not decode:
// the handler answers that).
func (az *authz) decode() kmsg.Request {
	req := kmsg.RequestForKey(az.r.Header.Key)
	req.SetVersion(az.r.Header.Version)
	read := req.ReadFrom
	if u, ok := req.(interface{ UnsafeReadFrom([]byte) error }); ok {
		read = u.UnsafeReadFrom // records alias the frame, which outlives the check
	}
	if err := read(az.r.Raw); err != nil {
		return nil
	}
	return req
}

// replaceRaw re-encodes a Raw API's request after a split.
func (az *authz) replaceRaw(req kmsg.Request) {
	az.r.Raw = req.AppendTo(nil)
}

var (
	codeTopic   = kerr.TopicAuthorizationFailed.Code
	codeGroup   = kerr.GroupAuthorizationFailed.Code
	codeCluster = kerr.ClusterAuthorizationFailed.Code
	codeTxn     = kerr.TransactionalIDAuthorizationFailed.Code
)

const (
	opRead            = metadata.ACLOpRead
	opWrite           = metadata.ACLOpWrite
	opCreate          = metadata.ACLOpCreate
	opDelete          = metadata.ACLOpDelete
	opAlter           = metadata.ACLOpAlter
	opDescribe        = metadata.ACLOpDescribe
	opClusterAction   = metadata.ACLOpClusterAction
	opDescribeConfigs = metadata.ACLOpDescribeConfigs
	opAlterConfigs    = metadata.ACLOpAlterConfigs
	opIdempotentWrite = metadata.ACLOpIdempotentWrite
)

// oneGroupRule refuses the whole request with GROUP_AUTHORIZATION_FAILED unless op is
// allowed on the group groupOf names.
func oneGroupRule[T kmsg.Request](op metadata.ACLOperation, groupOf func(T) string) authzCheck {
	return func(az *authz) bool {
		if az.group(op, groupOf(az.r.Body.(T))) {
			return true
		}
		az.refuseAll(codeGroup)
		return false
	}
}

func init() {
	authzRules[0] = authzProduce
	authzRules[1] = authzFetch
	authzRules[2] = authzListOffsets
	authzRules[3] = authzMetadata
	authzRules[8] = authzOffsetCommit
	authzRules[9] = authzOffsetFetch
	authzRules[10] = authzFindCoordinator
	authzRules[11] = oneGroupRule(opRead, func(r *kmsg.JoinGroupRequest) string { return r.Group })
	authzRules[12] = oneGroupRule(opRead, func(r *kmsg.HeartbeatRequest) string { return r.Group })
	authzRules[13] = oneGroupRule(opRead, func(r *kmsg.LeaveGroupRequest) string { return r.Group })
	authzRules[14] = oneGroupRule(opRead, func(r *kmsg.SyncGroupRequest) string { return r.Group })
	authzRules[15] = authzDescribeGroups
	authzRules[16] = authzListGroups
	authzRules[19] = authzCreateTopics
	authzRules[20] = authzDeleteTopics
	authzRules[22] = authzInitProducerID
	authzRules[25] = authzAddOffsetsToTxn
	authzRules[26] = func(az *authz) bool {
		if az.txnID(opWrite, az.r.Body.(*kmsg.EndTxnRequest).TransactionalID) {
			return true
		}
		az.refuseAll(codeTxn)
		return false
	}
	authzRules[28] = authzTxnOffsetCommit
	authzRules[32] = authzDescribeConfigs
	authzRules[42] = authzDeleteGroups
	authzRules[68] = oneGroupRule(opRead, func(r *kmsg.ConsumerGroupHeartbeatRequest) string { return r.Group })
}

// amendRaw applies r.amend to a hand-framed answer (Fetch's: bytes and file ranges):
// it reads the answer into memory, decodes it, amends it and encodes it again. Only a
// split request (some of its items refused) takes this path.
// It reports false when the answer does not read back (the connection is then closed).
func (r *Request) amendRaw(raw transport.Response) (transport.Response, bool) {
	if raw.Release != nil {
		defer raw.Release.Release()
	}
	buf := make([]byte, 0, raw.Size())
	for _, ch := range raw.Chunks {
		if ch.File == nil {
			buf = append(buf, ch.Bytes...)
			continue
		}
		n := len(buf)
		buf = buf[:n+int(ch.Length)]
		if _, err := ch.File.ReadAt(buf[n:], ch.Offset); err != nil {
			return transport.Response{}, false
		}
	}
	hdr := len(AppendResponseHeader(nil, &r.Header))
	resp := r.ResponseKind()
	if len(buf) < hdr || resp.ReadFrom(buf[hdr:]) != nil {
		return transport.Response{}, false
	}
	r.amend(resp)
	return encodeResponse(&r.Header, resp), true
}
