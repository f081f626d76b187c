package annotation

import (
	"math"
	"strconv"
	"time"
)

// durationProblem says why parseDuration rejected its input.
type durationProblem int

const (
	durationOK durationProblem = iota
	durationSyntax
	durationTooLong
)

// maxDays is the largest whole number of days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// parseDuration reads a Go duration, optionally led by a whole number of
// days: "7d", "30d", "1d12h". time.ParseDuration has no day unit, yet
// ttls are most naturally written in days. The sign, if any, is left to
// time.ParseDuration, so "-1d" is a syntax error rather than a negative
// number of days.
func parseDuration(s string) (time.Duration, durationProblem) {
	digits := 0
	for digits < len(s) && isDigit(s[digits]) {
		digits++
	}
	if digits == 0 || digits == len(s) || s[digits] != 'd' {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, durationSyntax
		}
		return d, durationOK
	}
	days, err := strconv.ParseInt(s[:digits], 10, 64)
	if err != nil || days > maxDays {
		return 0, durationTooLong // only digits, so the only possible failure is range
	}
	total := time.Duration(days) * 24 * time.Hour
	rest := s[digits+1:]
	if rest == "" {
		return total, durationOK
	}
	if !isDigit(rest[0]) { // no second sign: "1d-2h" is a typo, not 22h
		return 0, durationSyntax
	}
	more, err := time.ParseDuration(rest)
	if err != nil {
		return 0, durationSyntax
	}
	if more > math.MaxInt64-total {
		return 0, durationTooLong
	}
	return total + more, durationOK
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
