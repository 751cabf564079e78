package metadata

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors of AlterScramCredentials and DescribeScramCredentials results; the protocol
// layer maps them to Kafka's codes.
var (
	// ErrScramMechanism: an unknown mechanism (UNSUPPORTED_SASL_MECHANISM).
	ErrScramMechanism = errors.New("metadata: unknown SCRAM mechanism")
	// ErrScramUnacceptable: a credential Kafka would refuse (UNACCEPTABLE_CREDENTIAL).
	ErrScramUnacceptable = errors.New("metadata: unacceptable SCRAM credential")
	// ErrScramNotFound: no such credential (RESOURCE_NOT_FOUND).
	ErrScramNotFound = errors.New("metadata: SCRAM credential not found")
	// ErrScramDuplicate: a user named twice in one request (DUPLICATE_RESOURCE).
	ErrScramDuplicate = errors.New("metadata: user named twice in one request")
)

// ScramDeletion is one deletion of AlterUserScramCredentials (51).
type ScramDeletion struct {
	Name      string
	Mechanism ScramMechanism
}

// ScramUpsertion is one upsertion of AlterUserScramCredentials (51): the client sends
// the salt and the salted password, never the password.
type ScramUpsertion struct {
	Name           string
	Mechanism      ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramResult is the outcome for one user (nil Err: done).
type ScramResult struct {
	User string
	Err  error
}

// AlterScramCredentials is what the active controller does for
// AlterUserScramCredentials (51), Kafka's ScramControlManager.alterCredentials over im
// (its pending image):
//   - a user named by more than one deletion or upsertion of the request, whatever the
//     mechanisms, gets ErrScramDuplicate and none of its alterations is made;
//   - a deletion needs a known mechanism (ErrScramMechanism), a non-empty name
//     (ErrScramUnacceptable) and an existing credential (ErrScramNotFound);
//   - an upsertion needs a known mechanism, a non-empty name, 4096 to 16384 iterations
//     ("Too few/many iterations"), and (Samsa, where Kafka does not check) a salt of 1
//     to 1024 bytes (ErrScramUnacceptable); the salted password may have any length, as
//     in Kafka (it is an HMAC key); the stored and server keys are derived here, the
//     salted password is not kept.
//
// It returns one result per user, sorted by user, and the records of the valid
// alterations, to be proposed as one entry.
func AlterScramCredentials(im *Image, dels []ScramDeletion, ups []ScramUpsertion) ([]ScramResult, []Record) {
	count := map[string]int{}
	for _, d := range dels {
		count[d.Name]++
	}
	for _, u := range ups {
		count[u.Name]++
	}
	results := map[string]error{}
	var recs []Record
	for _, d := range dels {
		if count[d.Name] > 1 {
			results[d.Name] = fmt.Errorf("%w: a user credential cannot be altered twice in the same request", ErrScramDuplicate)
			continue
		}
		err := validScramTarget(d.Name, d.Mechanism)
		if err == nil {
			if _, ok := im.ScramCredential(d.Name, d.Mechanism); !ok {
				err = fmt.Errorf("%w: attempt to delete a user credential that does not exist", ErrScramNotFound)
			}
		}
		if err == nil {
			recs = append(recs, &RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
		}
		results[d.Name] = err
	}
	for _, u := range ups {
		if count[u.Name] > 1 {
			results[u.Name] = fmt.Errorf("%w: a user credential cannot be altered twice in the same request", ErrScramDuplicate)
			continue
		}
		err := validScramTarget(u.Name, u.Mechanism)
		switch {
		case err != nil:
		case u.Iterations < ScramMinIterations:
			err = fmt.Errorf("%w: Too few iterations", ErrScramUnacceptable)
		case u.Iterations > ScramMaxIterations:
			err = fmt.Errorf("%w: Too many iterations", ErrScramUnacceptable)
		case len(u.Salt) == 0 || len(u.Salt) > maxScramSalt:
			err = fmt.Errorf("%w: the salt must have 1 to %d bytes", ErrScramUnacceptable, maxScramSalt)
		}
		if err == nil {
			c, cerr := NewScramCredential(u.Name, u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
			if cerr != nil {
				err = fmt.Errorf("%w: %v", ErrScramUnacceptable, cerr)
			} else {
				recs = append(recs, &UserScramCredentialRecord{c})
			}
		}
		results[u.Name] = err
	}
	out := make([]ScramResult, 0, len(results))
	for u, err := range results {
		out = append(out, ScramResult{User: u, Err: err})
	}
	slices.SortFunc(out, func(a, b ScramResult) int { return strings.Compare(a.User, b.User) })
	return out, recs
}

func validScramTarget(name string, m ScramMechanism) error {
	if !m.Valid() {
		return fmt.Errorf("%w: Unknown SCRAM mechanism", ErrScramMechanism)
	}
	if name == "" {
		return fmt.Errorf("%w: Username must not be empty", ErrScramUnacceptable)
	}
	if err := validUserName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrScramUnacceptable, err)
	}
	return nil
}

// ScramUserDescription is one user of DescribeUserScramCredentials (50): its
// mechanisms and iterations (never salts or keys), or an error.
type ScramUserDescription struct {
	User        string
	Credentials []ScramCredentialInfo
	Err         error
}

// ScramCredentialInfo is what DescribeUserScramCredentials shows of a credential.
type ScramCredentialInfo struct {
	Mechanism  ScramMechanism
	Iterations int32
}

// DescribeScramCredentials answers DescribeUserScramCredentials (50) from im, as Kafka's
// broker does: users nil means every user with a credential (sorted); a requested user
// without credentials gets ErrScramNotFound, one requested twice gets
// ErrScramDuplicate (once, in the place of its first mention).
func DescribeScramCredentials(im *Image, users []string, all bool) []ScramUserDescription {
	var out []ScramUserDescription
	if all {
		var last string
		for _, c := range im.ScramCredentials() {
			if len(out) == 0 || c.Name != last {
				out = append(out, ScramUserDescription{User: c.Name})
				last = c.Name
			}
			d := &out[len(out)-1]
			d.Credentials = append(d.Credentials, ScramCredentialInfo{Mechanism: c.Mechanism, Iterations: c.Iterations})
		}
		return out
	}
	seen := map[string]int{}
	for _, u := range users {
		seen[u]++
	}
	done := map[string]bool{}
	for _, u := range users {
		if done[u] {
			continue
		}
		done[u] = true
		d := ScramUserDescription{User: u}
		switch {
		case seen[u] > 1:
			d.Err = fmt.Errorf("%w: Cannot describe SCRAM credentials for the same user twice in a single request", ErrScramDuplicate)
		default:
			for _, c := range im.ScramCredentialsOf(u) {
				d.Credentials = append(d.Credentials, ScramCredentialInfo{Mechanism: c.Mechanism, Iterations: c.Iterations})
			}
			if len(d.Credentials) == 0 {
				d.Err = fmt.Errorf("%w: Attempt to describe a user credential that does not exist", ErrScramNotFound)
			}
		}
		out = append(out, d)
	}
	return out
}
