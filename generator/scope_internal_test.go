package generator

import (
	"slices"
	"testing"
)

func TestNameWords(t *testing.T) {
	tests := []struct {
		name   string
		words  []string
		tenant bool
	}{
		{"X-Account-Id", []string{"x", "account", "id"}, true},
		{"X-AccountID", []string{"x", "account", "id"}, true},
		{"XOrgId", []string{"x", "org", "id"}, true},
		{"TenantID", []string{"tenant", "id"}, true},
		{"x_workspace", []string{"x", "workspace"}, true},
		{"X-Accountid", []string{"x", "accountid"}, true},
		{"Merchant-Account2", []string{"merchant", "account2"}, true},
		{"X-Original-Url", []string{"x", "original", "url"}, false},
		{"X-Teams", []string{"x", "teams"}, false},
		{"User-Agent", []string{"user", "agent"}, false},
		{"X-Request-Id", []string{"x", "request", "id"}, false},
		{"--", nil, false},
	}
	for _, tt := range tests {
		words := nameWords(tt.name)
		if !slices.Equal(words, tt.words) {
			t.Errorf("nameWords(%q) = %q, want %q", tt.name, words, tt.words)
		}
		if got := slices.ContainsFunc(words, tenantWord); got != tt.tenant {
			t.Errorf("%q looks like a tenant's header: %v, want %v", tt.name, got, tt.tenant)
		}
	}
}
