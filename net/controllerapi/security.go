package controllerapi

import (
	"errors"

	"github.com/samsa-broker/samsa/net/authz"
	"github.com/samsa-broker/samsa/net/connauth"
	"github.com/samsa-broker/samsa/net/peer"
	"github.com/samsa-broker/samsa/net/request"
)

// The security of the CONTROLLER listener (Config.Security): the same
// per-connection auth.Session as a broker's SecureListener (admit, the SaslHandshake
// and SaslAuthenticate handlers of 17_sasl_handshake.go and 36_sasl_authenticate.go,
// registered in the controller table too), so a SASL_SSL, SASL_PLAINTEXT or SSL
// controller listener serves nothing but ApiVersions and the SASL exchange before a
// connection authenticates, and closes a connection whose authentication fails or
// whose session expired without re-authentication (KIP-368). TLS itself is the
// transport's (transport.TLS.Listener on the Std transport).
//
// With an authorizer (connauth.Security.Authorizer, the node's authorizer.class.name;
// Config.Image gives the ACLs: the voter's committed image) every request
// after authentication is authorized as Kafka's ControllerApis does:
//
//	ApiVersions, SaslHandshake, SaslAuthenticate   no check (their rows: none)
//	super users                                     everything
//	CLUSTER_ACTION on the cluster                   everything: the nodes. The admin
//	    requests brokers forward here were authorized by the broker with the client's
//	    principal (Kafka's brokers wrap them in an Envelope, which needs CLUSTER_ACTION)
//	the inter-node APIs: SamsaRaft (the voters' raft; Kafka's Vote, BeginQuorumEpoch,
//	    EndQuorumEpoch), Fetch and FetchSnapshot of the metadata log,
//	    BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds
//	                                                CLUSTER_ACTION, else
//	    CLUSTER_AUTHORIZATION_FAILED (SamsaRaft, which has no error code: the
//	    connection is closed)
//	the APIs a client may send (DescribeQuorum, DescribeCluster, CreateTopics,
//	    the ACL, SCRAM and quota APIs, ...)       the broker listener's rules
//	    (net/authz, named by the broker table's registrations: DESCRIBE on the
//	    cluster for DescribeQuorum, CREATE for CreateTopics, ...)
//
// A PLAINTEXT controller listener (no Security) authorizes nothing, where Kafka
// would authorize User:ANONYMOUS.
// newControllerSessions returns the session keeper of a secured controller listener.
func newControllerSessions(h *Handler, sec connauth.Security) (*connauth.Listener, error) {
	if sec.Auth == nil {
		return nil, errors.New("kafka: a secured controller listener needs an auth server")
	}
	if sec.Authorizer != nil && h.cfg.Image == nil {
		return nil, errors.New("kafka: an authorizing controller listener needs the image of its ACLs (Config.Image)")
	}
	if sec.Name == "" {
		sec.Name = h.cfg.Listener
	}
	return connauth.New(sec, h.log.With("listener", sec.Name))
}

// NodeAPI reports whether key is one of the APIs only nodes send here.
func NodeAPI(key int16) bool {
	switch key {
	case peer.SamsaRaftKey, 1, 59, 56, 62, 63, 67, 82: // raft, Fetch, FetchSnapshot, AlterPartition, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, UpdateRaftVoter
		return true
	}
	return false
}

// authorize decides r (see above) by net/authz, under the broker listener's rule of
// its API; it reports whether r's handler is to run.
func (h *Handler) authorize(r *request.Request) bool {
	cs := connauth.Of(r)
	if cs == nil || h.sec.Security().Authorizer == nil {
		return true
	}
	var rule authz.Rule
	if h.cfg.Rules != nil {
		rule = h.cfg.Rules(r.Header.Key)
	}
	d := authz.Controller(cs.Caller(h.cfg.Image()), connauth.AuthzRequest(r), rule, NodeAPI(r.Header.Key))
	return connauth.Apply(r, d, h.sec.Log())
}
