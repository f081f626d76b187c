package idem_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http/httptest"
	"net/textproto"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

type part struct{ name, file, ctype, body, extra string }

func multipartBody(t *testing.T, boundary string, parts ...part) *multipart.Reader {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := `form-data; name="` + p.name + `"`
		if p.file != "" {
			cd += `; filename="` + p.file + `"`
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		if p.extra != "" {
			h.Set("X-Trace", p.extra)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(p.body))
	}
	w.Close()
	return multipart.NewReader(&buf, boundary)
}

func TestReadMultipart(t *testing.T) {
	parts := []part{
		{name: "caption", body: "a red widget"},
		{name: "photo", file: "w.png", ctype: "image/png", body: "\x89PNG\x00\x01"},
	}
	body, got, err := idem.ReadMultipart(multipartBody(t, "boundary-a", parts...), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The handler reads the same parts.
	for _, want := range parts {
		p, err := body.NextPart()
		if err != nil {
			t.Fatalf("re-reading part %s: %v", want.name, err)
		}
		b, _ := io.ReadAll(p)
		if p.FormName() != want.name || p.FileName() != want.file || string(b) != want.body || p.Header.Get("Content-Type") != want.ctype {
			t.Fatalf("part %q = %q %q %q, want %+v", p.FormName(), p.FileName(), b, p.Header.Get("Content-Type"), want)
		}
	}
	if _, err := body.NextPart(); !errors.Is(err, io.EOF) {
		t.Fatalf("extra part: %v", err)
	}

	// Another boundary and an unrelated header do not change what counts.
	again := []part{parts[0], parts[1]}
	again[1].extra = "trace-1"
	_, same, err := idem.ReadMultipart(multipartBody(t, "another-boundary", again...), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, same) {
		t.Errorf("fingerprint parts differ for the same parts:\n%+v\n%+v", got, same)
	}
	changed := []part{parts[0], parts[1]}
	changed[1].body = "\x89PNG\x00\x02"
	_, other, err := idem.ReadMultipart(multipartBody(t, "boundary-a", changed...), 0)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(got, other) {
		t.Error("a changed file does not change the fingerprint parts")
	}
}

func TestReadMultipartLimit(t *testing.T) {
	_, _, err := idem.ReadMultipart(multipartBody(t, "b", part{name: "f", body: "0123456789"}), 9)
	var p *idem.Problem
	if !errors.As(err, &p) || p.Status != 413 || p.Type != idem.TypeBodyTooLarge {
		t.Fatalf("over the limit: %v, want a 413 problem", err)
	}
	if _, _, err := idem.ReadMultipart(multipartBody(t, "b", part{name: "f", body: "0123456789"}), 10); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if body, parts, err := idem.ReadMultipart(nil, 0); body != nil || parts != nil || err != nil {
		t.Fatalf("nil reader: %v %v %v", body, parts, err)
	}
}

// A body ReadBody buffered is fingerprinted from that buffer, with the
// same parts ReadMultipart finds, and handed on as a reader over the same
// bytes: the handler reads the parts as sent.
func TestReadMultipartRequestUsesTheBuffer(t *testing.T) {
	var raw bytes.Buffer
	mw := multipart.NewWriter(&raw)
	mw.WriteField("amount", "100")
	fw, _ := mw.CreateFormFile("receipt", "r.pdf")
	fw.Write(bytes.Repeat([]byte("%PDF"), 1000))
	mw.Close()
	body := raw.Bytes()

	r := httptest.NewRequest("POST", "/refunds", bytes.NewReader(body))
	r.Header.Set("Content-Type", mw.FormDataContentType())
	if !idem.ReadBody(httptest.NewRecorder(), r, 0) {
		t.Fatal("ReadBody refused the body")
	}
	ctx := idem.WithRequest(context.Background(), r)
	strict, err := r.MultipartReader() // as the strict handler makes it
	if err != nil {
		t.Fatal(err)
	}
	handed, parts, err := idem.ReadMultipartRequest(ctx, strict, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := idem.ReadMultipart(multipart.NewReader(bytes.NewReader(body), mw.Boundary()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parts, want) {
		t.Fatalf("parts %+v, want %+v as ReadMultipart finds them", parts, want)
	}
	form, err := handed.ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if form.Value["amount"][0] != "100" || form.File["receipt"][0].Size != 4000 {
		t.Fatalf("the handler read %+v", form)
	}
}
