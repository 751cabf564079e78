package controller

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/acl"
	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// The security APIs the active controller serves: CreateAcls (30) and DeleteAcls (31)
// write AccessControlEntryRecords and RemoveAccessControlEntryRecords,
// AlterUserScramCredentials (51) writes UserScramCredentialRecords and
// RemoveUserScramCredentialRecords, each request's records as one entry (atomic, as
// Kafka's AclControlManager and ScramControlManager are). DescribeAcls (29) and
// DescribeUserScramCredentials (50) are answered from the pending image (brokers
// answer them from their own image; the controller serves them for tools that ask it).
// Authorisation is the listener's: the controller trusts what reaches it.

func (c *Controller) createACLsLocked(r *kmsg.CreateACLsRequest) *op {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.SetVersion(r.GetVersion())
	bindings := make([]metadata.ACLBinding, len(r.Creations))
	for i := range r.Creations {
		bindings[i] = acl.BindingOf(r.Version, &r.Creations[i])
	}
	results, recs := acl.CreateRecords(c.mu.pending.ACLs(), bindings, metadata.NewUUID)
	for _, res := range results {
		rr := kmsg.NewCreateACLsResponseResult()
		if res.Err != nil {
			rr.ErrorCode = acl.ErrorCode(res.Err)
			msg := res.Err.Error()
			rr.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, rr)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) deleteACLsLocked(r *kmsg.DeleteACLsRequest) *op {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.SetVersion(r.GetVersion())
	filters := make([]acl.Filter, len(r.Filters))
	for i := range r.Filters {
		filters[i] = acl.DeleteFilter(r.Version, &r.Filters[i])
	}
	results, recs := acl.DeleteRecords(c.mu.pending.ACLs(), filters)
	for _, res := range results {
		rr := kmsg.NewDeleteACLsResponseResult()
		if res.Err != nil {
			rr.ErrorCode = acl.ErrorCode(res.Err)
			msg := res.Err.Error()
			rr.ErrorMessage = &msg
		}
		for _, a := range res.Matched {
			rr.MatchingACLs = append(rr.MatchingACLs, acl.MatchingACL(a))
		}
		resp.Results = append(resp.Results, rr)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) describeACLsLocked(r *kmsg.DescribeACLsRequest) *op {
	return &op{resp: acl.DescribeResponse(c.mu.pending.ACLs(), r)}
}

// scramErrorCode maps coordinator/metadata's SCRAM errors to Kafka's codes.
func scramErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, metadata.ErrScramMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, metadata.ErrScramUnacceptable):
		return kerr.UnacceptableCredential.Code
	case errors.Is(err, metadata.ErrScramNotFound):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, metadata.ErrScramDuplicate):
		return kerr.DuplicateResource.Code
	}
	return kerr.UnknownServerError.Code
}

func (c *Controller) alterScramLocked(r *kmsg.AlterUserSCRAMCredentialsRequest) *op {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	resp.SetVersion(r.GetVersion())
	dels := make([]metadata.ScramDeletion, len(r.Deletions))
	for i, d := range r.Deletions {
		dels[i] = metadata.ScramDeletion{Name: d.Name, Mechanism: metadata.ScramMechanism(d.Mechanism)}
	}
	ups := make([]metadata.ScramUpsertion, len(r.Upsertions))
	for i, u := range r.Upsertions {
		ups[i] = metadata.ScramUpsertion{Name: u.Name, Mechanism: metadata.ScramMechanism(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword}
	}
	results, recs := metadata.AlterScramCredentials(c.mu.pending, dels, ups)
	for _, res := range results {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User = res.User
		if res.Err != nil {
			rr.ErrorCode = scramErrorCode(res.Err)
			msg := res.Err.Error()
			rr.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, rr)
	}
	if len(recs) == 0 {
		return &op{resp: resp}
	}
	return &op{recs: recs, finish: func(uint64) kmsg.Response { return resp }}
}

func (c *Controller) describeScramLocked(r *kmsg.DescribeUserSCRAMCredentialsRequest) *op {
	return &op{resp: DescribeScramResponse(c.mu.pending, r)}
}

// DescribeScramResponse answers DescribeUserScramCredentials (50) from im (brokers
// answer it from their image with this too).
func DescribeScramResponse(im *metadata.Image, r *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	resp.SetVersion(r.GetVersion())
	users := make([]string, len(r.Users))
	for i, u := range r.Users {
		users[i] = u.Name
	}
	for _, d := range metadata.DescribeScramCredentials(im, users, r.Users == nil) {
		rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		rr.User = d.User
		if d.Err != nil {
			rr.ErrorCode = scramErrorCode(d.Err)
			msg := d.Err.Error()
			rr.ErrorMessage = &msg
		}
		for _, ci := range d.Credentials {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = int8(ci.Mechanism), ci.Iterations
			rr.CredentialInfos = append(rr.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, rr)
	}
	return resp
}
