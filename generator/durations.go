package generator

import (
	"fmt"
	"strings"
	"time"
)

// durationExpr is d as a Go expression: 24 * time.Hour. Templates call
// it goDuration.
func durationExpr(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}} {
		if d%u.unit == 0 {
			if d == u.unit {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.unit, u.name)
		}
	}
	return fmt.Sprintf("time.Duration(%d)", d)
}

// durationText is d as the docs and annotations write it: 24h, 7d.
func durationText(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	// Drop time.Duration's zero tails: 24h0m0s is 24h, 1h30m0s is 1h30m.
	// A bare "0s" suffix is not one of them: 10s and 20m0s keep their 0.
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
