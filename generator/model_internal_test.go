package generator

import (
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{500 * time.Millisecond, "500ms"},
		{10 * time.Second, "10s"},
		{30 * time.Second, "30s"},
		{90 * time.Second, "1m30s"},
		{time.Minute, "1m"},
		{20 * time.Minute, "20m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{10 * time.Hour, "10h"},
		{time.Hour + 30*time.Second, "1h0m30s"},
		{24 * time.Hour, "24h"},
		{36 * time.Hour, "36h"},
		{48 * time.Hour, "2d"},
		{7 * 24 * time.Hour, "7d"},
		{50 * time.Hour, "50h"},
	}
	for _, tt := range tests {
		if got := durationText(tt.d); got != tt.want {
			t.Errorf("durationText(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestDurationExpr(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Minute, "time.Minute"},
		{30 * time.Second, "30 * time.Second"},
		{90 * time.Second, "90 * time.Second"},
		{7 * 24 * time.Hour, "168 * time.Hour"},
		{1500 * time.Millisecond, "1500 * time.Millisecond"},
		{time.Microsecond, "time.Duration(1000)"},
	}
	for _, tt := range tests {
		if got := durationExpr(tt.d); got != tt.want {
			t.Errorf("durationExpr(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestRoutePath: an operation's route is spelled as oapi-codegen
// registers it on each kind's router, or its body gate would not be found.
func TestRoutePath(t *testing.T) {
	for _, tt := range []struct{ server, in, want string }{
		{"echo", "/orders", "/orders"},
		{"echo", "/orders/{id}", "/orders/:id"},
		{"gin", "/orders/{id}/items/{item_id}", "/orders/:id/items/:item_id"},
		{"chi", "/orders/{id}", "/orders/{id}"},
		{"std-http", "/orders/{id}", "/orders/{id}"},
		{"std-http", "/orders/{order-id}", "/orders/{order_id}"},
		{"std-http", "/orders/", "/orders/{$}"},
	} {
		if got := routePath(tt.server, tt.in); got != tt.want {
			t.Errorf("routePath(%s, %s) = %s, want %s", tt.server, tt.in, got, tt.want)
		}
	}
}
