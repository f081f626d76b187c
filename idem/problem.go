package idem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemBase is the prefix of every problem type URI; the fragment names a
// section of docs/problems.md, which documents each type.
const ProblemBase = "https://github.com/idemgen/idemgen/blob/main/docs/problems.md#"

// Problem types answered by the runtime. They are stable: clients may
// switch on them.
const (
	TypeMissingKey           = ProblemBase + "missing-idempotency-key"
	TypeInvalidKey           = ProblemBase + "invalid-idempotency-key"
	TypeInvalidRequest       = ProblemBase + "invalid-request"
	TypeBodyTooLarge         = ProblemBase + "body-too-large"
	TypeUnsupportedMediaType = ProblemBase + "unsupported-media-type"
	TypeInvalidScope         = ProblemBase + "invalid-scope"
	TypeKeyInUse             = ProblemBase + "idempotency-key-in-use"
	TypeKeyReused            = ProblemBase + "idempotency-key-reused"
	TypeStoreUnavailable     = ProblemBase + "store-unavailable"
	TypeInternal             = ProblemBase + "internal-error"
	TypeAttemptAbandoned     = ProblemBase + "attempt-abandoned"
	TypeStoreMisconfigured   = ProblemBase + "store-misconfigured"
)

// ContentTypeProblem is the media type of RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem detail. A Scope function may return one
// to choose the answer to a request it rejects.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Response renders the problem as a response.
func (p *Problem) Response() *Response {
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and an int: this cannot fail.
		panic(err)
	}
	h := http.Header{"Content-Type": {ContentTypeProblem}}
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.RetryAfter)))
	}
	return &Response{Status: p.Status, Header: h, Body: body}
}

func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// WriteProblem writes p to w.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	_ = p.Response().Write(w)
}
