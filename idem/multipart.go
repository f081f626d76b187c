package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
)

// DefaultMaxMultipartBytes bounds the multipart body ReadMultipart buffers.
const DefaultMaxMultipartBytes = 32 << 20

// MultipartPart is what the fingerprint sees of one part: its form name,
// file name, content type and a digest of its content, in request order.
type MultipartPart struct {
	Name        string `json:"name"`
	FileName    string `json:"filename,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	SHA256      string `json:"sha256"`
}

// ReadMultipart reads a multipart body so that it can be fingerprinted,
// and returns a reader over the same parts for the handler. The boundary
// and part headers other than the form name, file name and content type
// do not count. A body over limit bytes (0: DefaultMaxMultipartBytes) is a
// 413 *Problem.
func ReadMultipart(r *multipart.Reader, limit int64) (*multipart.Reader, []MultipartPart, error) {
	if r == nil {
		return nil, nil, nil // the request sent another of the operation's body types
	}
	if limit <= 0 {
		limit = DefaultMaxMultipartBytes
	}
	var (
		buf   bytes.Buffer
		out   = multipart.NewWriter(&buf)
		parts []MultipartPart
		total int64
	)
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, badMultipart(err)
		}
		h := textproto.MIMEHeader{}
		for _, k := range []string{"Content-Disposition", "Content-Type"} {
			if v := p.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		w, err := out.CreatePart(h)
		if err != nil {
			return nil, nil, err
		}
		sum := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(p, limit-total+1))
		total += n
		if err != nil {
			return nil, nil, badMultipart(err)
		}
		if total > limit {
			return nil, nil, &Problem{
				Type:   TypeBodyTooLarge,
				Title:  "Request body too large",
				Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("The multipart body is over %d bytes, the most this operation buffers to fingerprint it. Send a smaller body.", limit),
			}
		}
		parts = append(parts, MultipartPart{
			Name:        p.FormName(),
			FileName:    p.FileName(),
			ContentType: p.Header.Get("Content-Type"),
			SHA256:      hex.EncodeToString(sum.Sum(nil)),
		})
	}
	if err := out.Close(); err != nil {
		return nil, nil, err
	}
	return multipart.NewReader(&buf, out.Boundary()), parts, nil
}

func badMultipart(err error) error {
	return &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The multipart body could not be read: " + err.Error() + ". Fix the request and send it again; it was not run.",
	}
}
