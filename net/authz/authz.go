package authz

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/controller"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Request is what a rule reads of one request: its API key and version, and its body,
// decoded by kmsg (Body) or, for an API whose handler decodes its body itself
// (Produce, Fetch), raw (Raw, aliasing the frame; Body nil). A rule narrows a decoded
// body in place; a raw body it narrows by re-encoding it into Decision.Raw.
type Request struct {
	Key     int16
	Version int16
	Body    kmsg.Request
	Raw     []byte
}

// Caller is who sends a request and what it is judged by: the listener's authorizer,
// the principal and host (acl.Context), and the metadata image the broker answers
// from (its ACLs, and the topic ids rules resolve; nil is an image with nothing
// committed yet).
type Caller struct {
	Authorizer *acl.Authorizer
	Principal  acl.Context
	Image      *metadata.Image
}

// Outcome is what becomes of a request once it is authorised.
type Outcome uint8

// The outcomes.
const (
	// Run: the handler serves the request, narrowed to what the principal may do
	// (Body edited in place, or Decision.Raw), and Decision.Amend edits its answer.
	Run Outcome = iota
	// Answered: Decision.Response is the whole answer; the handler does not run.
	Answered
	// Unanswered: nothing goes on the wire (a Produce with acks=0 refused whole).
	Unanswered
	// Closed: the connection is closed without an answer, once the earlier answers
	// left (fail closed); Decision.Reason says why.
	Closed
)

// Decision is the authorisation of one request.
type Decision struct {
	Outcome Outcome
	// Raw (Run) is a raw body narrowed and re-encoded; nil: the body as it came.
	Raw []byte
	// Amend (Run) edits the handler's answer before it is encoded: refused items put
	// back with their error, items the principal may not see removed, KIP-430's
	// authorized operations filled in. nil: nothing to edit. It runs once, on the
	// goroutine that answers, before the answer leaves.
	Amend func(kmsg.Response)
	// Response (Answered) is the answer.
	Response kmsg.Response
	// Reason says why a connection is closed, or why a node's request is refused.
	Reason string
}

// Rule is the authorisation of one Kafka API beyond what its row of acl.APIs says of
// the cluster alone: which names of the request it checks, and how a refusal is
// answered (whole, split or amended; see the package doc). The rule of an API is
// named by the API's registration in net/kafka; RowAlone says which rows need none.
type Rule func(az *Check) Decision

// Check is one request's authorisation in progress, as a Rule sees it: the
// authorizer (already following the image's ACLs), the principal, the image and the
// request. A Check lives as long as its request; amendments it returns may call it
// from the answering goroutine.
type Check struct {
	a   *acl.Authorizer
	ctx acl.Context
	im  *metadata.Image
	req Request
}

// check starts the authorisation of req. The authorizer follows the image the broker
// answers from: Update is a pointer comparison unless the ACLs changed, when the
// first request after the change rebuilds the index.
func (c Caller) check(req Request) *Check {
	im := c.Image
	if im == nil {
		im = new(metadata.Image) // nothing committed yet: no ACLs
	}
	c.Authorizer.Update(im.ACLs())
	return &Check{a: c.Authorizer, ctx: c.Principal, im: im, req: req}
}

// Broker decides a request of a broker listener (see the package doc); rule is its
// API's rule, nil when the API's row decides it alone. A super user may do
// everything. KIP-430's authorized-operations fields are filled in the answer of a
// request that runs.
func Broker(c Caller, req Request, rule Rule) Decision {
	az := c.check(req)
	var d Decision
	if !az.a.IsSuperUser(az.ctx.Principal) {
		d = az.decide(rule)
	}
	if d.Outcome == Run {
		d.Amend = chain(d.Amend, operations(az.a, az.ctx, req.Body))
	}
	return d
}

// Controller decides a request of the controller listener, as Kafka's ControllerApis
// does: a request whose row asks for nothing (ApiVersions, the SASL exchange) passes;
// so does everything of a super user or of a principal with CLUSTER_ACTION on the
// cluster (the nodes; the admin requests brokers forward were authorised by the
// broker with the client's principal). Otherwise an API only nodes send (node) is
// refused with CLUSTER_AUTHORIZATION_FAILED (its connection closed when its response
// cannot carry the code), and the others are decided as on a broker listener, by rule
// and their row.
func Controller(c Caller, req Request, rule Rule, node bool) Decision {
	if row, ok := acl.Lookup(req.Key); ok && row.None {
		return Decision{}
	}
	az := c.check(req)
	if az.a.IsSuperUser(az.ctx.Principal) || az.cluster(opClusterAction) {
		return Decision{}
	}
	if !node {
		return az.decide(rule)
	}
	d := az.refuseAll(codeCluster)
	d.Reason = "a node's request without CLUSTER_ACTION on the cluster"
	if d.Outcome == Closed {
		d.Reason += ", and no error code to answer it with"
	}
	return d
}

// CreateDenied returns the topics of topics the caller may not create: none when it
// is a super user or may CREATE on the cluster, else those without CREATE on the topic.
// StreamsGroupHeartbeat's handler asks it before the broker creates a group's missing
// internal topics.
func CreateDenied(c Caller, topics []string) []string {
	az := c.check(Request{})
	if az.a.IsSuperUser(az.ctx.Principal) || az.cluster(opCreate) {
		return nil
	}
	var denied []string
	for _, t := range topics {
		if !az.topic(opCreate, t) {
			denied = append(denied, t)
		}
	}
	return denied
}

// RowAlone reports whether row decides its API without a rule: no authorisation
// applies, or every requirement is on the cluster and always applies.
func RowAlone(row *acl.API) bool {
	if row.None {
		return true
	}
	for _, q := range row.Requirements {
		if q.Scope != acl.ScopeCluster || q.When != acl.Always {
			return false
		}
	}
	return true
}

// decide applies the request's row and rule (the principal is not a super user). An
// API without a row, or whose row names more than the cluster and which has no rule,
// has its connection closed (fail closed).
func (az *Check) decide(rule Rule) Decision {
	row, ok := acl.Lookup(az.req.Key)
	switch {
	case !ok:
		return closed("no authorisation row")
	case row.None:
		return Decision{}
	case rule != nil:
		return rule(az)
	case !RowAlone(row):
		return closed("no authorisation rule for its resources yet")
	}
	if code := az.clusterRow(row); code != 0 {
		return az.refuseAll(code)
	}
	return Decision{}
}

// clusterRow evaluates a row whose requirements are all on the cluster and always
// apply (RowAlone): the code of the refusal, 0 when allowed. A TryNext requirement
// that passes allows the request; one that fails leaves the decision to the next.
func (az *Check) clusterRow(row *acl.API) int16 {
	for _, q := range row.Requirements {
		allowed := az.cluster(q.Operation)
		switch {
		case q.OnDenied == acl.TryNext && allowed:
			return 0
		case q.OnDenied == acl.TryNext:
		case !allowed:
			return q.Error
		}
	}
	return 0
}

func (az *Check) allowed(op metadata.ACLOperation, rt metadata.ACLResourceType, name string) bool {
	return az.a.Authorize(az.ctx, acl.Action{Operation: op, Resource: rt, Name: name})
}

func (az *Check) cluster(op metadata.ACLOperation) bool {
	return az.allowed(op, metadata.ACLResourceCluster, acl.ClusterName)
}

func (az *Check) topic(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceTopic, name)
}

func (az *Check) group(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceGroup, name)
}

func (az *Check) txnID(op metadata.ACLOperation, name string) bool {
	return az.allowed(op, metadata.ACLResourceTransactionalID, name)
}

// topicName is a topic's name from its name or (newer versions) its id; "" for an id
// the image does not know (the handler answers UNKNOWN_TOPIC_ID).
func (az *Check) topicName(name string, id [16]byte) string {
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
func (az *Check) topicOK(op metadata.ACLOperation, name string, id [16]byte) bool {
	n := az.topicName(name, id)
	if n == "" && id != [16]byte{} {
		return true
	}
	return az.topic(op, n)
}

// responseKind returns a new, empty response of the request's kind at its version
// (nil for a key kmsg does not know).
func (az *Check) responseKind() kmsg.Response {
	resp := kmsg.ResponseForKey(az.req.Key)
	if resp == nil {
		return nil
	}
	resp.SetVersion(az.req.Version)
	return resp
}

// refuseAll answers the whole request with code on every item: the controller's error
// shape for the APIs it serves, else the response's top-level error code. A response
// with neither closes the connection.
func (az *Check) refuseAll(code int16) Decision {
	req := az.req.Body
	if req != nil && controller.Serves(req) {
		return answer(controller.ErrorResponse(req, code, kerr.ErrorForCode(code).Error()))
	}
	resp := az.responseKind()
	if resp == nil || !setTopErrorCode(resp, code) {
		return closed("a refusal this response cannot carry")
	}
	return answer(resp)
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

// decode decodes a raw body for its authorisation (nil when it does not decode: the
// handler answers that).
func (az *Check) decode() kmsg.Request {
	req := kmsg.RequestForKey(az.req.Key)
	req.SetVersion(az.req.Version)
	read := req.ReadFrom
	if u, ok := req.(interface{ UnsafeReadFrom([]byte) error }); ok {
		read = u.UnsafeReadFrom // records alias the frame, which outlives the check
	}
	if err := read(az.req.Raw); err != nil {
		return nil
	}
	return req
}

// split finishes a split of a decoded request: nothing refused passes it as it is;
// nothing allowed answers the refusals alone (the handler does not run); otherwise
// keep narrows the request to the allowed items and add puts the refused ones into
// the answer.
func (az *Check) split(allowed, refused int, keep func(), add func(kmsg.Response)) Decision {
	if refused == 0 {
		return Decision{}
	}
	if allowed == 0 {
		resp := az.responseKind()
		add(resp)
		return answer(resp)
	}
	keep()
	return amended(add)
}

// oneGroup refuses the whole request with GROUP_AUTHORIZATION_FAILED unless op is
// allowed on its group.
func (az *Check) oneGroup(op metadata.ACLOperation, group string) Decision {
	if az.group(op, group) {
		return Decision{}
	}
	return az.refuseAll(codeGroup)
}

func answer(resp kmsg.Response) Decision { return Decision{Outcome: Answered, Response: resp} }

func amended(f func(kmsg.Response)) Decision { return Decision{Amend: f} }

func closed(why string) Decision { return Decision{Outcome: Closed, Reason: why} }

// chain runs first, then then (either may be nil).
func chain(first, then func(kmsg.Response)) func(kmsg.Response) {
	switch {
	case first == nil:
		return then
	case then == nil:
		return first
	}
	return func(resp kmsg.Response) {
		first(resp)
		then(resp)
	}
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
