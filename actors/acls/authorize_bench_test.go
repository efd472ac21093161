package acls

import (
	"fmt"
	"testing"
)

// BenchmarkAuthorize: one check against 10,000 literal bindings (100
// principals x 100 topics) and 100 prefixes, the hot-path cost per
// request (or per topic of a produce/fetch).
func BenchmarkAuthorize(b *testing.B) {
	var all []ACL
	for p := range 100 {
		for tp := range 100 {
			all = append(all, allow(Topic, Literal, fmt.Sprintf("topic-%d", tp), fmt.Sprintf("User:u%d", p), "*", Read))
		}
		all = append(all, deny(Topic, Prefixed, fmt.Sprintf("secret-%d-", p), "User:*", "*", All))
	}
	set := NewSet(all)
	cfg := Config{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if ok, _ := Authorize(set, cfg, "User:u42", "10.0.0.1", Describe, Topic, "topic-42"); !ok {
			b.Fatal("denied")
		}
	}
}
