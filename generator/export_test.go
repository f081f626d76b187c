package generator

import "time"

// ClientCode exposes clientCode to the tests of the augmented spec.
var ClientCode = clientCode

// WithClock makes m number dbmate's migrations by now.
func WithClock(m Migrations, now func() time.Time) Migrations {
	m.now = now
	return m
}
