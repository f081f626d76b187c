package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
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
	var buf bytes.Buffer
	out := multipart.NewWriter(&buf)
	parts, err := readParts(r, limit, out)
	if err != nil {
		return nil, nil, err
	}
	if err := out.Close(); err != nil {
		return nil, nil, err
	}
	return multipart.NewReader(&buf, out.Boundary()), parts, nil
}

// ReadMultipartRequest is ReadMultipart for the generated handler, whose
// request ctx carries (see WithRequest): when ReadBody buffered the body
// already, it fingerprints the parts from that buffer and hands the
// handler a reader over the same bytes, so that the body is held once,
// not twice.
func ReadMultipartRequest(ctx context.Context, r *multipart.Reader, limit int64) (*multipart.Reader, []MultipartPart, error) {
	req := RequestFrom(ctx)
	if r == nil || req == nil {
		return ReadMultipart(r, limit)
	}
	buffered, ok := req.Body.(*bufferedBody)
	_, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if !ok || err != nil || params["boundary"] == "" {
		return ReadMultipart(r, limit)
	}
	boundary := params["boundary"]
	parts, err := readParts(multipart.NewReader(bytes.NewReader(buffered.data), boundary), limit, nil)
	if err != nil {
		return nil, nil, err
	}
	return multipart.NewReader(bytes.NewReader(buffered.data), boundary), parts, nil
}

// readParts fingerprints r's parts, copying them to out unless it is nil.
func readParts(r *multipart.Reader, limit int64, out *multipart.Writer) ([]MultipartPart, error) {
	if limit <= 0 {
		limit = DefaultMaxMultipartBytes
	}
	var (
		parts []MultipartPart
		total int64
	)
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, badMultipart(err)
		}
		sum := sha256.New()
		var w io.Writer = sum
		if out != nil {
			h := textproto.MIMEHeader{}
			for _, k := range []string{"Content-Disposition", "Content-Type"} {
				if v := p.Header.Get(k); v != "" {
					h.Set(k, v)
				}
			}
			pw, err := out.CreatePart(h)
			if err != nil {
				return nil, err
			}
			w = io.MultiWriter(pw, sum)
		}
		n, err := io.Copy(w, io.LimitReader(p, limit-total+1))
		total += n
		if err != nil {
			return nil, badMultipart(err)
		}
		if total > limit {
			return nil, &Problem{
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
	return parts, nil
}

func badMultipart(err error) error {
	return &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The multipart body could not be read: " + err.Error() + ". Fix the request and send it again; it was not run.",
	}
}
