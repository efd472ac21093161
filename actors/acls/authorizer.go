package acls

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer answers the broker's checks from the store's current set. It
// is safe for concurrent use: every field is set at construction and the
// set is read lock-free.
type Authorizer struct {
	store      *Store
	superUsers map[string]bool
	// allowEveryone reads allow.everyone.if.no.acl.found at each check, so
	// that altering the broker config takes effect at once.
	allowEveryone func() bool
}

// NewAuthorizer checks against store's bindings. superUsers are principals
// ("User:admin"); allowEveryone (nil: false) is read at each check.
func NewAuthorizer(store *Store, superUsers []string, allowEveryone func() bool) *Authorizer {
	a := &Authorizer{store: store, superUsers: map[string]bool{}, allowEveryone: allowEveryone}
	for _, u := range superUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.superUsers[u] = true
		}
	}
	return a
}

// ParseSuperUsers splits Kafka's super.users form: "User:a;User:b".
func ParseSuperUsers(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Store is the ACL store the authorizer reads.
func (a *Authorizer) Store() *Store { return a.store }

func (a *Authorizer) config() Config {
	return Config{SuperUsers: a.superUsers, AllowEveryoneIfNoACLFound: a.allowEveryone != nil && a.allowEveryone()}
}

// Authorize decides op on the resource for principal from host (see the
// package function Authorize).
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) (bool, Reason) {
	return Authorize(a.store.Set(), a.config(), principal, host, op, rt, name)
}

// AuthorizeAny decides op on some resource of type rt (see the package
// function AuthorizeAny).
func (a *Authorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) (bool, Reason) {
	return AuthorizeAny(a.store.Set(), a.config(), principal, host, op, rt)
}
