package idem

import (
	"bytes"
	"net/http"
)

// HeaderReplayed marks a response served from the key store.
const HeaderReplayed = "Idempotent-Replayed"

// Response is a captured HTTP response: what a handler's typed response
// wrote, as stored for replay.
type Response struct {
	Status int
	// Header holds the Content-Type and the response headers the spec
	// declares: what the typed response object sets, nothing added by
	// middleware outside it.
	Header http.Header
	Body   []byte
	// Replayed is true when the response comes from the store.
	Replayed bool
	// outcome is set on the answers the layer gives itself (see Render).
	outcome Outcome
}

// Write sends the response to w.
func (r *Response) Write(w http.ResponseWriter) error {
	h := w.Header()
	for k, v := range r.Header {
		h[k] = v
	}
	if r.Replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(r.Status)
	_, err := w.Write(r.Body)
	return err
}

// Writer writes a typed response; the generated code passes a typed
// response object's Visit method.
type Writer func(http.ResponseWriter) error

// recorder is the http.ResponseWriter a typed response is captured with.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Capture runs write against an in-memory response writer and returns what
// it wrote.
func Capture(write Writer) (*Response, error) {
	rec := &recorder{header: make(http.Header)}
	if err := write(rec); err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}, nil
}
