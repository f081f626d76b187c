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

func TestColonPath(t *testing.T) {
	for in, want := range map[string]string{
		"/orders":                      "/orders",
		"/orders/{id}":                 "/orders/:id",
		"/orders/{id}/items/{item_id}": "/orders/:id/items/:item_id",
	} {
		if got := (operation{Path: in}).ColonPath(); got != want {
			t.Errorf("ColonPath(%s) = %s, want %s", in, got, want)
		}
	}
}
