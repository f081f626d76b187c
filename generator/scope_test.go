package generator_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A scope header set for the whole document is checked on every
// operation it applies to, and the error says that the operation may
// override it.
func TestScopeHeaderDefault(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	src := header + `    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - name: X-Tenant-Id
          in: header
          schema:
            type: string
      responses:
        "201":
          description: ok
    put:
      operationId: replaceThing
      x-idempotent: true
      responses:
        "200":
          description: ok
    patch:
      operationId: updateThing
      x-idempotent: {scope: none}
      responses:
        "200":
          description: ok
` + components
	line := strings.Count(src, "\n") + 2 // the scope's line below
	src += "x-idempotency:\n  scope: {header: X-Tenant-Id}\n"
	writeFile(t, spec, []byte(src))
	_, err := generateFrom(configFor(t, dir, "openapi.yaml", ""))
	want := fmt.Sprintf(`%s:%d:19: x-idempotent on PUT /things: x-idempotency.scope.header X-Tenant-Id: the operation declares no header parameter "X-Tenant-Id"; `+
		`expected a header parameter declared on the operation, or a scope of its own in x-idempotent`, spec, line)
	if err == nil || err.Error() != want {
		t.Fatalf("got error\n\t%v\nwant\n\t%s", err, want)
	}
}

// Annotated operations whose callers can be told apart, by a tenant's
// header or by security, but whose keys the spec does not scope get a
// warning, in the order of the spec's text; nothing else does.
func TestScopeWarnings(t *testing.T) {
	const shared = "keys are shared by every caller, but the operation "
	const headerFix = "; set scope: {header: %s} in x-idempotent or x-idempotency, scope: {function: true} if idem.Options.Scope scopes keys in Go, or scope: none if callers may share keys"
	const securityFix = "; set scope: {function: true} in x-idempotent or x-idempotency and scope keys by the authenticated principal in idem.Options.Scope, or scope: none if callers may share keys"
	tests := []struct {
		name  string
		paths string // the spec's paths, from line 6
		root  string // at the document root, after components
		want  []string
	}{
		{
			name: "tenant headers, in the order of the text",
			paths: `  /z:
    post:
      x-idempotent: true
      parameters:
        - {name: X-Request-Id, in: header, schema: {type: string}}
        - {name: X-AccountID, in: header, schema: {type: string}}
        - {name: x-workspace, in: header, schema: {type: string}}
      responses: {"201": {description: ok}}
  /a:
    parameters:
      - {name: X-Org-Id, in: header, schema: {type: string}}
    post:
      x-idempotent: true
      responses: {"201": {description: ok}}
    put:
      responses: {"200": {description: ok}}
`,
			want: []string{
				"8:7: warning: x-idempotent on POST /z: " + shared + "declares headers X-AccountID, x-workspace" + fmt.Sprintf(headerFix, "X-AccountID"),
				"18:7: warning: x-idempotent on POST /a: " + shared + "declares header X-Org-Id" + fmt.Sprintf(headerFix, "X-Org-Id"),
			},
		},
		{
			name: "headers that only look like tenants' in part",
			paths: `  /a:
    post:
      x-idempotent: true
      parameters:
        - {name: X-Original-Url, in: header, schema: {type: string}}
        - {name: X-Teams-Url, in: header, schema: {type: string}}
        - {name: account, in: query, schema: {type: string}}
      responses: {"201": {description: ok}}
`,
		},
		{
			name: "the document's security, overridden or not",
			paths: `  /a:
    post:
      x-idempotent: true
      responses: {"201": {description: ok}}
    put:
      x-idempotent: true
      security: []
      responses: {"200": {description: ok}}
    patch:
      x-idempotent: true
      security: [{apiKey: []}, {}]
      parameters:
        - {name: X-Tenant, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
`,
			root: `  securitySchemes:
    bearerAuth: {type: http, scheme: bearer}
    apiKey: {type: apiKey, in: header, name: X-Api-Key}
security:
  - bearerAuth: []
  - apiKey: []
`,
			want: []string{
				"8:7: warning: x-idempotent on POST /a: " + shared + "requires security schemes apiKey, bearerAuth" + securityFix,
				"15:7: warning: x-idempotent on PATCH /a: " + shared + "declares header X-Tenant and requires security scheme apiKey" + fmt.Sprintf(headerFix, "X-Tenant"),
			},
		},
		{
			name: "any scope silences the warning",
			paths: `  /a:
    parameters:
      - {name: X-Tenant-Id, in: header, schema: {type: string}}
    post:
      x-idempotent: {scope: none}
      responses: {"201": {description: ok}}
    put:
      x-idempotent: {scope: {function: true}}
      responses: {"200": {description: ok}}
    patch:
      x-idempotent: {scope: {header: X-Tenant-Id}}
      responses: {"200": {description: ok}}
    delete:
      x-idempotent: true
      responses: {"204": {description: ok}}
`,
			root: `  securitySchemes:
    bearerAuth: {type: http, scheme: bearer}
security: [{bearerAuth: []}]
x-idempotency:
  scope: none
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := filepath.Join(dir, "openapi.yaml")
			src := "openapi: 3.0.3\ninfo:\n  title: warnings\n  version: \"1\"\npaths:\n" + tt.paths + "components:\n" + tt.root
			writeFile(t, spec, []byte(src))
			res := generate(t, configFor(t, dir, "openapi.yaml", ""))
			var want []string
			for _, w := range tt.want {
				want = append(want, spec+":"+w)
			}
			if !slices.Equal(res.Warnings, want) {
				t.Errorf("warnings:\n\t%s\nwant\n\t%s", strings.Join(res.Warnings, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

// scopesTest drives testdata/scopes' generated handler over HTTP with the
// in-memory store, in the generated package, as a user's test would.
const scopesTest = `package scopes

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// service records the scope of each attempt it runs.
type service struct{ scopes []string }

func (s *service) CreateWidget(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateWidgetRequestObject) (CreateWidgetResponseObject, error) {
	s.scopes = append(s.scopes, at.Scope())
	return CreateWidget201JSONResponse{Id: "w1", Name: request.Body.Name}, nil
}

func (s *service) CopyWidget(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CopyWidgetRequestObject) (CopyWidgetResponseObject, error) {
	s.scopes = append(s.scopes, at.Scope())
	return CopyWidget201JSONResponse{Id: "w2", Name: "copy"}, nil
}

func (s *service) ReplaceSettings(ctx context.Context, at *idem.Attempt[memstore.NoTx], request ReplaceSettingsRequestObject) (ReplaceSettingsResponseObject, error) {
	s.scopes = append(s.scopes, at.Scope())
	return ReplaceSettings204Response{}, nil
}

func (s *service) Ping(ctx context.Context, at *idem.Attempt[memstore.NoTx], request PingRequestObject) (PingResponseObject, error) {
	s.scopes = append(s.scopes, at.Scope())
	return Ping204Response{}, nil
}

func principal(_ context.Context, r *http.Request) (string, error) {
	p, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", errors.New("no principal")
	}
	return p, nil
}

// Without Options.Scope the handler is not built: the spec says Go
// scopes copyWidget's and replaceSettings' keys.
func TestScopeFunctionRequired(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "opts.Scope is nil") || !strings.Contains(msg, "replaceSettings and copyWidget") {
			t.Errorf("panic %q, want one naming the nil Options.Scope and both operations", msg)
		}
	}()
	NewIdempotentHandler(&service{}, memstore.New(memstore.Options{}), IdempotentHandlerOptions{})
}

func TestScopes(t *testing.T) {
	svc := &service{}
	opts := IdempotentHandlerOptions{Options: idem.Options{Scope: principal, Logger: slog.New(slog.DiscardHandler)}}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), opts))
	defer srv.Close()
	send := func(method, path, who, tenant, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+who)
		req.Header.Set("Idempotency-Key", "k1")
		if tenant != "" {
			req.Header.Set("X-Tenant-Id", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const sep = idem.ScopeSeparator
	for _, r := range []struct {
		method, path, who, tenant, body string
		status                          int
	}{
		// The header scopes createWidget's keys, joined with the Go scope.
		{"POST", "/widgets", "alice", "t1", "{\"name\": \"a\"}", 201},
		{"POST", "/widgets", "alice", "t2", "{\"name\": \"a\"}", 201},
		{"POST", "/widgets", "alice", "t1", "{\"name\": \"a\"}", 201}, // a replay
		{"POST", "/widgets/w1/copies", "alice", "t1", "", 201},
		{"POST", "/widgets/w1/copies", "bob", "t1", "", 201},
		{"PUT", "/settings", "bob", "", "{}", 204},
		{"POST", "/pings", "bob", "", "", 204},
	} {
		if got := send(r.method, r.path, r.who, r.tenant, r.body); got != r.status {
			t.Errorf("%s %s as %s in %q: status %d, want %d", r.method, r.path, r.who, r.tenant, got, r.status)
		}
	}
	want := []string{"alice" + sep + "t1", "alice" + sep + "t2", "alice" + sep + "t1", "bob" + sep + "t1", "bob", "bob"}
	if strings.Join(svc.scopes, ",") != strings.Join(want, ",") {
		t.Errorf("ran with the scopes %q, want %q", svc.scopes, want)
	}
}
`

// The generated code reads the scope header and requires idem.Options.Scope
// as testdata/scopes says.
func TestScopesRun(t *testing.T) {
	t.Parallel()
	runGenerated(t, "scopes", scopesTest)
}
