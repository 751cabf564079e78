package metadata

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// The security records: SCRAM credentials and ACLs, Kafka's metadata record types of
// the same api keys (UserScramCredentialRecord 11, RemoveUserScramCredentialRecord 12,
// AccessControlEntryRecord 23, RemoveAccessControlEntryRecord 24). Their byte layouts
// are in the package doc. The controller validates a request against its pending image
// before it proposes these records (coordinator/acl.ValidateBinding for ACLs, the
// iteration bounds below for credentials); Apply checks the same structural rules again.
const (
	typeUserScramCredential       recordType = 11
	typeRemoveUserScramCredential recordType = 12
	typeAccessControlEntry        recordType = 23
	typeRemoveAccessControlEntry  recordType = 24
)

// ScramMechanism is Kafka's ScramMechanism type byte (AlterUserScramCredentials,
// DescribeUserScramCredentials and the credential records carry it).
type ScramMechanism int8

// The SCRAM mechanisms.
const (
	ScramUnknown ScramMechanism = 0
	ScramSHA256  ScramMechanism = 1
	ScramSHA512  ScramMechanism = 2
)

// Kafka's iteration bounds for both mechanisms (ScramMechanism.minIterations, and the
// 16384 AlterUserScramCredentials accepts at most).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// maxScramSalt bounds a credential's salt (Kafka's clients send 32 to 64 bytes).
const maxScramSalt = 1024

// ParseScramMechanism maps a SASL mechanism name (SCRAM-SHA-256, SCRAM-SHA-512) to its
// type; names are matched exactly, as Kafka does.
func ParseScramMechanism(name string) (ScramMechanism, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return ScramUnknown, false
}

// Valid reports whether m is SHA-256 or SHA-512.
func (m ScramMechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

// String is the SASL mechanism name.
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM(%d)", int8(m))
}

// Hash returns the mechanism's hash constructor (nil for an invalid mechanism).
func (m ScramMechanism) Hash() func() hash.Hash {
	switch m {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// KeyLen is the length of the mechanism's keys and proofs (0 if invalid).
func (m ScramMechanism) KeyLen() int {
	switch m {
	case ScramSHA256:
		return sha256.Size
	case ScramSHA512:
		return sha512.Size
	}
	return 0
}

// SaltPassword is RFC 5802's SaltedPassword := Hi(password, salt, i) (PBKDF2 with the
// mechanism's HMAC). The password is used as given: like Kafka's clients, Samsa does
// not apply SASLprep. Clients compute it (AlterUserScramCredentials sends the salted
// password, never the password); the broker computes it only for SASL/PLAIN logins
// checked against SCRAM credentials.
func (m ScramMechanism) SaltPassword(password string, salt []byte, iterations int) ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: scram mechanism %d", ErrInvalidRecord, m)
	}
	if iterations < 1 || iterations > ScramMaxIterations {
		return nil, fmt.Errorf("%w: scram iterations %d", ErrInvalidRecord, iterations)
	}
	return pbkdf2.Key(m.Hash(), password, salt, iterations, m.KeyLen())
}

// Keys derives RFC 5802's StoredKey := H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey := HMAC(SaltedPassword, "Server Key"), what a credential record stores.
func (m ScramMechanism) Keys(saltedPassword []byte) (storedKey, serverKey []byte) {
	h := m.Hash()
	if h == nil {
		return nil, nil
	}
	mac := hmac.New(h, saltedPassword)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	d := h()
	d.Write(clientKey)
	storedKey = d.Sum(nil)
	mac = hmac.New(h, saltedPassword)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

// NewScramCredential builds the credential of user for a salted password (what
// AlterUserScramCredentials' upsertion carries: salt, salted password, iterations).
func NewScramCredential(user string, m ScramMechanism, salt, saltedPassword []byte, iterations int32) (ScramCredential, error) {
	c := ScramCredential{Name: user, Mechanism: m, Salt: slices.Clone(salt), Iterations: iterations}
	if !m.Valid() {
		return ScramCredential{}, fmt.Errorf("%w: scram mechanism %d", ErrInvalidRecord, m)
	}
	c.StoredKey, c.ServerKey = m.Keys(saltedPassword)
	if err := c.validate(); err != nil {
		return ScramCredential{}, err
	}
	return c, nil
}

// ScramCredential is one user's salted SCRAM credential for one mechanism: never a
// password, only what RFC 5802 lets a server keep.
type ScramCredential struct {
	Name       string
	Mechanism  ScramMechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

func (c *ScramCredential) validate() error {
	if err := validUserName(c.Name); err != nil {
		return err
	}
	if !c.Mechanism.Valid() {
		return fmt.Errorf("%w: user %q: scram mechanism %d", ErrInvalidRecord, c.Name, c.Mechanism)
	}
	if len(c.Salt) == 0 || len(c.Salt) > maxScramSalt {
		return fmt.Errorf("%w: user %q: salt of %d bytes", ErrInvalidRecord, c.Name, len(c.Salt))
	}
	if n := c.Mechanism.KeyLen(); len(c.StoredKey) != n || len(c.ServerKey) != n {
		return fmt.Errorf("%w: user %q: %s keys of %d and %d bytes (want %d)", ErrInvalidRecord, c.Name, c.Mechanism, len(c.StoredKey), len(c.ServerKey), n)
	}
	if c.Iterations < ScramMinIterations || c.Iterations > ScramMaxIterations {
		return fmt.Errorf("%w: user %q: %d iterations (allowed %d to %d)", ErrInvalidRecord, c.Name, c.Iterations, ScramMinIterations, ScramMaxIterations)
	}
	return nil
}

// maxUserName bounds SCRAM user names (SASL names are short; 255 is RFC 4616's floor).
const maxUserName = 1024

func validUserName(name string) error {
	if name == "" || len(name) > maxUserName || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: scram user name %q", ErrInvalidRecord, name)
	}
	return nil
}

// UserScramCredentialRecord creates or replaces a user's credential for one mechanism.
type UserScramCredentialRecord struct {
	ScramCredential
}

// RemoveUserScramCredentialRecord deletes a user's credential for one mechanism; it
// must exist.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism ScramMechanism
}

// ACLResourceType is Kafka's ResourceType for ACLs (not the config resource types of
// ResourceType: there 4 is a broker, here the cluster).
type ACLResourceType int8

// The ACL resource types. Unknown and Any appear in filters only.
const (
	ACLResourceUnknown         ACLResourceType = 0
	ACLResourceAny             ACLResourceType = 1
	ACLResourceTopic           ACLResourceType = 2
	ACLResourceGroup           ACLResourceType = 3
	ACLResourceCluster         ACLResourceType = 4
	ACLResourceTransactionalID ACLResourceType = 5
	ACLResourceDelegationToken ACLResourceType = 6
	ACLResourceUser            ACLResourceType = 7
)

var aclResourceNames = map[ACLResourceType]string{ACLResourceUnknown: "UNKNOWN", ACLResourceAny: "ANY",
	ACLResourceTopic: "TOPIC", ACLResourceGroup: "GROUP", ACLResourceCluster: "CLUSTER",
	ACLResourceTransactionalID: "TRANSACTIONAL_ID", ACLResourceDelegationToken: "DELEGATION_TOKEN", ACLResourceUser: "USER"}

func (t ACLResourceType) String() string { return enumName(aclResourceNames, t) }

// Stored reports whether an ACL may name this resource type.
func (t ACLResourceType) Stored() bool { return t >= ACLResourceTopic && t <= ACLResourceUser }

// ACLPatternType is Kafka's PatternType.
type ACLPatternType int8

// The pattern types: ACLs are Literal (the name, or "*" for every resource of the
// type) or Prefixed; Any and Match appear in filters only.
const (
	ACLPatternUnknown  ACLPatternType = 0
	ACLPatternAny      ACLPatternType = 1
	ACLPatternMatch    ACLPatternType = 2
	ACLPatternLiteral  ACLPatternType = 3
	ACLPatternPrefixed ACLPatternType = 4
)

var aclPatternNames = map[ACLPatternType]string{ACLPatternUnknown: "UNKNOWN", ACLPatternAny: "ANY",
	ACLPatternMatch: "MATCH", ACLPatternLiteral: "LITERAL", ACLPatternPrefixed: "PREFIXED"}

func (p ACLPatternType) String() string { return enumName(aclPatternNames, p) }

// ACLOperation is Kafka's AclOperation.
type ACLOperation int8

// The operations. Unknown and Any appear in filters only; All matches every operation.
const (
	ACLOpUnknown         ACLOperation = 0
	ACLOpAny             ACLOperation = 1
	ACLOpAll             ACLOperation = 2
	ACLOpRead            ACLOperation = 3
	ACLOpWrite           ACLOperation = 4
	ACLOpCreate          ACLOperation = 5
	ACLOpDelete          ACLOperation = 6
	ACLOpAlter           ACLOperation = 7
	ACLOpDescribe        ACLOperation = 8
	ACLOpClusterAction   ACLOperation = 9
	ACLOpDescribeConfigs ACLOperation = 10
	ACLOpAlterConfigs    ACLOperation = 11
	ACLOpIdempotentWrite ACLOperation = 12
	ACLOpCreateTokens    ACLOperation = 13
	ACLOpDescribeTokens  ACLOperation = 14
)

var aclOpNames = map[ACLOperation]string{ACLOpUnknown: "UNKNOWN", ACLOpAny: "ANY", ACLOpAll: "ALL",
	ACLOpRead: "READ", ACLOpWrite: "WRITE", ACLOpCreate: "CREATE", ACLOpDelete: "DELETE", ACLOpAlter: "ALTER",
	ACLOpDescribe: "DESCRIBE", ACLOpClusterAction: "CLUSTER_ACTION", ACLOpDescribeConfigs: "DESCRIBE_CONFIGS",
	ACLOpAlterConfigs: "ALTER_CONFIGS", ACLOpIdempotentWrite: "IDEMPOTENT_WRITE", ACLOpCreateTokens: "CREATE_TOKENS",
	ACLOpDescribeTokens: "DESCRIBE_TOKENS"}

func (o ACLOperation) String() string { return enumName(aclOpNames, o) }

// Stored reports whether an ACL may name this operation.
func (o ACLOperation) Stored() bool { return o >= ACLOpAll && o <= ACLOpDescribeTokens }

// ACLPermission is Kafka's AclPermissionType.
type ACLPermission int8

// The permissions. Unknown and Any appear in filters only.
const (
	ACLPermissionUnknown ACLPermission = 0
	ACLPermissionAny     ACLPermission = 1
	ACLPermissionDeny    ACLPermission = 2
	ACLPermissionAllow   ACLPermission = 3
)

var aclPermNames = map[ACLPermission]string{ACLPermissionUnknown: "UNKNOWN", ACLPermissionAny: "ANY",
	ACLPermissionDeny: "DENY", ACLPermissionAllow: "ALLOW"}

func (p ACLPermission) String() string { return enumName(aclPermNames, p) }

func enumName[T ~int8](names map[T]string, v T) string {
	if s, ok := names[v]; ok {
		return s
	}
	return fmt.Sprintf("%d", int8(v))
}

// ACLBinding is one access control entry on a resource pattern, Kafka's AclBinding.
// It is comparable: two ACLs with equal bindings are the same ACL.
type ACLBinding struct {
	ResourceType ACLResourceType
	ResourceName string
	PatternType  ACLPatternType
	Principal    string // "User:alice", "User:*"
	Host         string // an IP address or "*"
	Operation    ACLOperation
	Permission   ACLPermission
}

func (b ACLBinding) String() string {
	return fmt.Sprintf("(pattern=%s:%s:%s, principal=%s, host=%s, operation=%s, permission=%s)",
		b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// maxACLString bounds the strings of a stored ACL.
const maxACLString = 32 << 10

// Validate checks the rules every stored ACL keeps (Kafka's AclControlManager
// validateNewAcl, and a principal of the form type:name): a concrete resource type,
// operation and permission, a LITERAL or PREFIXED pattern, non-empty names.
func (b ACLBinding) Validate() error {
	bad := func(why string, v any) error { return fmt.Errorf("%w: acl %s: %s %v", ErrInvalidRecord, b, why, v) }
	switch {
	case !b.ResourceType.Stored():
		return bad("resource type", b.ResourceType)
	case b.PatternType != ACLPatternLiteral && b.PatternType != ACLPatternPrefixed:
		return bad("pattern type", b.PatternType)
	case !b.Operation.Stored():
		return bad("operation", b.Operation)
	case b.Permission != ACLPermissionAllow && b.Permission != ACLPermissionDeny:
		return bad("permission", b.Permission)
	case b.ResourceName == "":
		return bad("resource name", "empty")
	case b.Host == "":
		return bad("host", "empty")
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return bad("principal (want type:name)", b.Principal)
	}
	for _, s := range []string{b.ResourceName, b.Principal, b.Host} {
		if len(s) > maxACLString || !utf8.ValidString(s) {
			return bad("string", "too long or not UTF-8")
		}
	}
	return nil
}

// AccessControlEntryRecord adds an ACL. Its ID is unique; no two ACLs of an image have
// the same binding (the controller answers a CreateAcls of an existing binding without
// a record, as Kafka does).
type AccessControlEntryRecord struct {
	ID UUID
	ACLBinding
}

// RemoveAccessControlEntryRecord deletes the ACL with ID; it must exist.
type RemoveAccessControlEntryRecord struct {
	ID UUID
}

// ACL is one ACL of an image.
type ACL struct {
	ID UUID
	ACLBinding
}

// ACLSet is the ACLs of an image. It is immutable and shared by every image until a
// batch changes an ACL, so a cache keyed by the *ACLSet (the authorizer's index) is
// valid for as long as the pointer is the image's.
type ACLSet struct {
	byID      cowMap[UUID, ACLBinding]
	byBinding cowMap[ACLBinding, UUID]
	sorted    atomic.Pointer[[]ACL]
}

var emptyACLs = &ACLSet{}

// Len is the number of ACLs.
func (s *ACLSet) Len() int { return s.byID.len() }

// Get returns the ACL with id.
func (s *ACLSet) Get(id UUID) (ACLBinding, bool) { return s.byID.get(id) }

// Find returns the id of the ACL with binding b.
func (s *ACLSet) Find(b ACLBinding) (UUID, bool) { return s.byBinding.get(b) }

// All returns every ACL sorted by id. The slice is shared: do not modify it.
func (s *ACLSet) All() []ACL {
	if p := s.sorted.Load(); p != nil {
		return *p
	}
	out := make([]ACL, 0, s.byID.len())
	for id, b := range s.byID.all() {
		out = append(out, ACL{ID: id, ACLBinding: b})
	}
	slices.SortFunc(out, func(a, b ACL) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	s.sorted.Store(&out)
	return out
}

type scramKey struct {
	name string
	mech ScramMechanism
}

// securityState is the part of an Image the security records change.
type securityState struct {
	scram  cowMap[scramKey, ScramCredential]
	acls   *ACLSet       // nil: none
	quotas *ClientQuotas // nil: none (records_quota.go)
}

// securityOwned tracks what a batch copied of securityState.
type securityOwned struct {
	scram      uint32
	aclsCopied bool
	aclByID    uint32
	aclByBind  uint32
	// quotas: the batch's copy of the quota set, and the entities whose key maps it
	// copied.
	quotasCopied bool
	quotaMaps    map[QuotaEntity]bool
}

// securityRecord is implemented by the four security record types (the one case the
// state machine's and codec's switches have for them).
type securityRecord interface {
	Record
	securityRecord()
}

func (*UserScramCredentialRecord) recordType() recordType       { return typeUserScramCredential }
func (*RemoveUserScramCredentialRecord) recordType() recordType { return typeRemoveUserScramCredential }
func (*AccessControlEntryRecord) recordType() recordType        { return typeAccessControlEntry }
func (*RemoveAccessControlEntryRecord) recordType() recordType  { return typeRemoveAccessControlEntry }

func (*UserScramCredentialRecord) securityRecord()       {}
func (*RemoveUserScramCredentialRecord) securityRecord() {}
func (*AccessControlEntryRecord) securityRecord()        {}
func (*RemoveAccessControlEntryRecord) securityRecord()  {}

func isNilSecurity(r securityRecord) bool {
	switch r := r.(type) {
	case *UserScramCredentialRecord:
		return r == nil
	case *RemoveUserScramCredentialRecord:
		return r == nil
	case *AccessControlEntryRecord:
		return r == nil
	case *RemoveAccessControlEntryRecord:
		return r == nil
	case *ClientQuotaRecord:
		return r == nil
	}
	return true
}

// ScramCredential returns user name's credential for mechanism m.
func (im *Image) ScramCredential(name string, m ScramMechanism) (ScramCredential, bool) {
	return im.sec.scram.get(scramKey{name, m})
}

// ScramCredentials returns every credential sorted by user name, then mechanism
// (DescribeUserScramCredentials without users). Their byte slices are shared: do not
// modify them.
func (im *Image) ScramCredentials() []ScramCredential {
	out := make([]ScramCredential, 0, im.sec.scram.len())
	for _, c := range im.sec.scram.all() {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ScramCredential) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// ScramCredentialsOf returns user name's credentials, by mechanism (none: nil).
func (im *Image) ScramCredentialsOf(name string) []ScramCredential {
	var out []ScramCredential
	for _, m := range []ScramMechanism{ScramSHA256, ScramSHA512} {
		if c, ok := im.ScramCredential(name, m); ok {
			out = append(out, c)
		}
	}
	return out
}

// ACLs returns the image's ACLs (never nil).
func (im *Image) ACLs() *ACLSet {
	if im.sec.acls == nil {
		return emptyACLs
	}
	return im.sec.acls
}

// securityRecords returns the records that rebuild the security state: credentials by
// user and mechanism, then ACLs by id.
func (im *Image) securityRecords() []Record {
	var out []Record
	for _, c := range im.ScramCredentials() {
		out = append(out, &UserScramCredentialRecord{c})
	}
	for _, a := range im.ACLs().All() {
		out = append(out, &AccessControlEntryRecord{ID: a.ID, ACLBinding: a.ACLBinding})
	}
	return append(out, im.quotaRecords()...)
}

// mutableACLs returns the batch's own copy of the ACL set.
func (b *builder) mutableACLs() *ACLSet {
	if !b.secOwn.aclsCopied {
		c := &ACLSet{}
		if cur := b.im.sec.acls; cur != nil {
			c.byID, c.byBinding = cur.byID, cur.byBinding
		}
		b.im.sec.acls = c
		b.secOwn.aclsCopied = true
	}
	return b.im.sec.acls
}

func (b *builder) applySecurity(r securityRecord) error {
	switch r := r.(type) {
	case *UserScramCredentialRecord:
		c := r.ScramCredential
		if err := c.validate(); err != nil {
			return err
		}
		c.Salt, c.StoredKey, c.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
		b.im.sec.scram.set(scramKey{c.Name, c.Mechanism}, c, &b.secOwn.scram)
		return nil
	case *RemoveUserScramCredentialRecord:
		k := scramKey{r.Name, r.Mechanism}
		if _, ok := b.im.sec.scram.get(k); !ok {
			return fmt.Errorf("%w: remove %s credential of %q: none", ErrInvalidRecord, r.Mechanism, r.Name)
		}
		b.im.sec.scram.del(k, &b.secOwn.scram)
		return nil
	case *AccessControlEntryRecord:
		if r.ID == ZeroUUID {
			return fmt.Errorf("%w: acl id is zero", ErrInvalidRecord)
		}
		if err := r.ACLBinding.Validate(); err != nil {
			return err
		}
		cur := b.im.ACLs()
		if _, ok := cur.Get(r.ID); ok {
			return fmt.Errorf("%w: acl id %s exists", ErrInvalidRecord, r.ID)
		}
		if id, ok := cur.Find(r.ACLBinding); ok {
			return fmt.Errorf("%w: acl %s exists as %s", ErrInvalidRecord, r.ACLBinding, id)
		}
		s := b.mutableACLs()
		s.byID.set(r.ID, r.ACLBinding, &b.secOwn.aclByID)
		s.byBinding.set(r.ACLBinding, r.ID, &b.secOwn.aclByBind)
		return nil
	case *RemoveAccessControlEntryRecord:
		bind, ok := b.im.ACLs().Get(r.ID)
		if !ok {
			return fmt.Errorf("%w: remove acl %s: none", ErrInvalidRecord, r.ID)
		}
		s := b.mutableACLs()
		s.byID.del(r.ID, &b.secOwn.aclByID)
		s.byBinding.del(bind, &b.secOwn.aclByBind)
		return nil
	case *ClientQuotaRecord:
		return b.applyQuota(r)
	}
	return fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
}

// appendSecurity writes a security record's payload.
func appendSecurity(dst []byte, r securityRecord) []byte {
	switch r := r.(type) {
	case *UserScramCredentialRecord:
		dst = appendString(dst, r.Name)
		dst = append(dst, byte(r.Mechanism))
		dst = appendBytes(dst, r.Salt)
		dst = appendBytes(dst, r.StoredKey)
		dst = appendBytes(dst, r.ServerKey)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Iterations))
	case *RemoveUserScramCredentialRecord:
		dst = appendString(dst, r.Name)
		dst = append(dst, byte(r.Mechanism))
	case *AccessControlEntryRecord:
		dst = append(dst, r.ID[:]...)
		dst = append(dst, byte(r.ResourceType))
		dst = appendString(dst, r.ResourceName)
		dst = append(dst, byte(r.PatternType))
		dst = appendString(dst, r.Principal)
		dst = appendString(dst, r.Host)
		dst = append(dst, byte(r.Operation), byte(r.Permission))
	case *RemoveAccessControlEntryRecord:
		dst = append(dst, r.ID[:]...)
	case *ClientQuotaRecord:
		dst = appendQuota(dst, r)
	}
	return dst
}

// decodeSecurity reads the payload of a security record of type typ.
func decodeSecurity(typ recordType, d *decoder) Record {
	switch typ {
	case typeUserScramCredential:
		return &UserScramCredentialRecord{ScramCredential{Name: d.string(), Mechanism: ScramMechanism(d.int8()),
			Salt: d.bytes(), StoredKey: d.bytes(), ServerKey: d.bytes(), Iterations: d.int32()}}
	case typeRemoveUserScramCredential:
		return &RemoveUserScramCredentialRecord{Name: d.string(), Mechanism: ScramMechanism(d.int8())}
	case typeAccessControlEntry:
		r := &AccessControlEntryRecord{ID: d.uuid()}
		r.ResourceType = ACLResourceType(d.int8())
		r.ResourceName = d.string()
		r.PatternType = ACLPatternType(d.int8())
		r.Principal, r.Host = d.string(), d.string()
		r.Operation, r.Permission = ACLOperation(d.int8()), ACLPermission(d.int8())
		return r
	case typeRemoveAccessControlEntry:
		return &RemoveAccessControlEntryRecord{ID: d.uuid()}
	case typeClientQuota:
		return decodeQuota(d)
	}
	d.fail("security record type")
	return nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// bytes reads appendBytes's form; an empty value is nil.
func (d *decoder) bytes() []byte {
	n := d.uvarint("bytes length")
	if n > uint64(len(d.b)) {
		d.fail("bytes")
		return nil
	}
	if n == 0 {
		return nil
	}
	return slices.Clone(d.take(int(n), "bytes"))
}
