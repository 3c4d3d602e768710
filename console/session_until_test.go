package console

import (
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
)

// A sign-in lasts console.session_ttl, or less: no longer than the identity provider's token it
// was made with.
func TestSignInLastsNoLongerThanItsToken(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSessions(8*time.Hour, func() time.Time { return now })
	p := gateway.Principal{ID: "vera", Roles: []string{"viewer"}}
	for _, c := range []struct {
		until, want time.Time
	}{
		{time.Time{}, now.Add(8 * time.Hour)},                // a static token
		{now.Add(5 * time.Minute), now.Add(5 * time.Minute)}, // a provider's token expiring first
		{now.Add(24 * time.Hour), now.Add(8 * time.Hour)},    // one outliving the ttl
	} {
		if got := s.start(p, c.until).expires; !got.Equal(c.want) {
			t.Errorf("until %v: the sign-in ends %v, want %v", c.until, got, c.want)
		}
	}
}
