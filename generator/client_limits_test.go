package generator_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem/idemclient"
)

// TestClientHonoursDeclaredKeyLimits generates IdempotentClient for a spec
// whose operations declare their own Idempotency-Key parameter with a
// maxLength of 20, a minLength of 40, a pattern of 16 to 20 letters and
// digits, a pattern with a literal prefix, a maxLength so small that the
// keys are weak, and limits a UUID fits, and drives it against the server
// generated from the same spec: every call gets its 201 (the server
// answers a key outside the limits with a 400), and every key the server
// sees is within the limits, fresh for each call. The same operations
// take path parameters of types from other packages (UUID, time, date,
// one of x-go-type-import),
// or named like the locals of the client's methods (key, opts, editors),
// which must reach the server intact.
func TestClientHonoursDeclaredKeyLimits(t *testing.T) {
	dir := filepath.Join("testdata", "clientlimits")
	res := generate(t, configFor(t, dir, "openapi.yaml", "client: true\n"))
	client := string(generatedFile(t, res, "idempotency_client.gen.go"))
	// The keys each method makes: a format, or none for random UUIDs.
	for method, format := range map[string]string{
		"CreateTransfer":  "idemclient.KeyFormat{Alphabet: idemclient.Base64URL, Len: 20}",
		"ReverseTransfer": "idemclient.KeyFormat{Alphabet: idemclient.Alphanumeric, Len: 40}",
		"Schedule":        "idemclient.KeyFormat{Alphabet: idemclient.Alphanumeric, Len: 20}",
		"CloseDay":        `idemclient.KeyFormat{Prefix: "idem_", Alphabet: idemclient.LowerAlphanumeric, Len: 24}`,
		"CreatePayout":    "idemclient.KeyFormat{Alphabet: idemclient.Base64URL, Len: 12}",
		"CreateRefund":    "",
		"CreateNote":      "",
		"PutSetting":      "",
		"ResetDevice":     "",
	} {
		body := methodSource(t, client, method)
		switch {
		case format == "" && strings.Contains(body, "opts.Keys"):
			t.Errorf("%s sets its keys' format, want random UUIDs:\n%s", method, body)
		case format != "" && !strings.Contains(body, "opts.Keys = "+format+"\n"):
			t.Errorf("%s does not make keys of %s:\n%s", method, format, body)
		}
	}
	if body := methodSource(t, client, "CreatePayout"); !strings.Contains(body, "They are\n// weak") && !strings.Contains(body, "They are weak") {
		t.Errorf("CreatePayout's 72-bit keys are not documented as weak:\n%s", body)
	}
	bin := buildTestBinary(t, "clientlimits", func(t *testing.T) string {
		return writeGoPackage(t, res, map[string]string{"clientlimits_run_test.go": clientLimitsRun})
	})
	runTestBinary(t, bin, "", "")
}

// TestClientRefusesUnmakeableKeys: where an operation's declared
// Idempotency-Key parameter leaves IdempotentClient no keys it can make,
// client: true fails generation, at the spec's line and column of the
// limit at fault (through $refs), saying what was expected; the server
// alone generates.
func TestClientRefusesUnmakeableKeys(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "clientlimits"))
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "refused.yaml")
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	generate(t, configFor(t, dir, "refused.yaml", "")) // no client, no refusal
	_, err = generateFrom(configFor(t, dir, "refused.yaml", "client: true\n"))
	if err == nil {
		t.Fatal("Generate succeeded; want the three operations refused")
	}
	var specErr *annotation.Error
	if !errors.As(err, &specErr) {
		t.Fatalf("got %v; want annotation errors", err)
	}
	want := []string{
		positionOf(t, spec, src, `"^[a-z]+[0-9]$"`) + `: client: true on POST /letters-then-digit: the client cannot make keys that the pattern "^[a-z]+[0-9]$" always matches: it makes random UUIDs, or random characters of one length (here 1 to 255) from one of [0-9A-Za-z], [A-Za-z0-9_-], [0-9a-z], [0-9A-Z], [0-9a-f], [0-9A-F], [a-z], [A-Z], [0-9], after any literal text the pattern starts with; expected a pattern that matches every key of one such kind, such as ^[A-Za-z0-9]{20,40}$, or client: false`,
		positionOf(t, spec, src, "10\n") + ": client: true on POST /short: the strongest keys the client can make within its limits (maxLength 10) are 10 random characters of [A-Za-z0-9_-], 60 random bits, under the 64 bits that keep two calls from sharing a key; expected limits that allow stronger keys, such as maxLength: 11, which allows 11 random characters of [A-Za-z0-9_-]",
		// The pattern is that of a schema that a parameter component
		// names, which the operation names.
		positionOf(t, spec, src, `"^[A-Z]{4}$"`) + ": client: true on POST /four-letters: the strongest keys the client can make within its limits (pattern ^[A-Z]{4}$) are 4 random characters of [A-Z], 18 random bits, under the 64 bits that keep two calls from sharing a key; expected limits that allow stronger keys",
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got errors\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestClientKeyChoice generates IdempotentClient for one operation whose
// Idempotency-Key parameter declares each set of limits, and checks the
// keys it chooses (none: random UUIDs) or its refusal, then draws keys of
// the chosen kind and checks them against the limits: the analysis of the
// pattern must never choose keys it rejects, however rarely.
func TestClientKeyChoice(t *testing.T) {
	for _, tc := range []struct {
		name           string
		minLen, maxLen int // 0: not declared
		pattern        string
		want           string // the KeyFormat literal, "" for UUIDs, or "refused: ..."
	}{
		{name: "uuid-like", pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"},
		{name: "any digit", pattern: "[0-9]"}, // a UUID always has its version digit
		{name: "hex", pattern: "^[a-f0-9]{32}$", want: "{Alphabet: idemclient.LowerHex, Len: 32}"},
		{name: "upper", pattern: "^[A-Z0-9]{26}$", want: "{Alphabet: idemclient.UpperAlphanumeric, Len: 26}"},
		{name: "digits", pattern: `^\d+$`, want: "{Alphabet: idemclient.Digits, Len: 39}"},
		{name: "starts with a letter", pattern: "^[a-z]", want: "{Alphabet: idemclient.LowerLetters, Len: 28}"},
		{name: "word characters", pattern: `^\w{20,}$`, want: "{Alphabet: idemclient.Alphanumeric, Len: 22}"},
		{name: "base64url", pattern: "^[a-zA-Z0-9_-]{1,30}$", want: "{Alphabet: idemclient.Alphanumeric, Len: 22}"},
		{name: "base64url short", pattern: "^[a-zA-Z0-9_-]{1,20}$", want: "{Alphabet: idemclient.Base64URL, Len: 20}"},
		{name: "case-insensitive prefix", pattern: "^(?i)idem_[a-z]{30}$", want: `{Prefix: "idem_", Alphabet: idemclient.LowerLetters, Len: 30}`},
		{name: "word boundaries", pattern: `\b[a-z0-9]{24}\b`, want: "{Alphabet: idemclient.LowerAlphanumeric, Len: 24}"},
		{name: "alternation", pattern: "a|^[0-9]{50}$", want: "{Alphabet: idemclient.Digits, Len: 50}"},
		{name: "lower alphanumeric within maxLength", maxLen: 30, pattern: "^[a-z0-9]+$", want: "{Alphabet: idemclient.LowerAlphanumeric, Len: 25}"},
		{name: "minLength over a UUID", minLen: 37, want: "{Alphabet: idemclient.Alphanumeric, Len: 37}"},
		{name: "maxLength under a UUID", maxLen: 35, want: "{Alphabet: idemclient.Alphanumeric, Len: 22}"},
		{name: "weak but allowed", maxLen: 11, want: "{Alphabet: idemclient.Base64URL, Len: 11}"},
		{name: "upper-case UUIDs", pattern: "^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$", want: "refused: the client cannot make keys that the pattern"},
		{name: "one key", pattern: "^ab$", want: "refused: the client cannot make keys that the pattern"},
		{name: "too short", maxLen: 10, want: "refused: the strongest keys the client can make within its limits (maxLength 10) are 10 random characters of [A-Za-z0-9_-], 60 random bits"},
		{name: "too short a pattern", pattern: "^[0-9]{12}$", want: "refused: the strongest keys the client can make within its limits (pattern ^[0-9]{12}$) are 12 random characters of [0-9], 39 random bits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			schema := "            type: string\n"
			if tc.minLen > 0 {
				schema += fmt.Sprintf("            minLength: %d\n", tc.minLen)
			}
			if tc.maxLen > 0 {
				schema += fmt.Sprintf("            maxLength: %d\n", tc.maxLen)
			}
			if tc.pattern != "" {
				schema += fmt.Sprintf("            pattern: %s\n", strconv.Quote(tc.pattern))
			}
			writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(`openapi: 3.0.3
info: {title: keys, version: "1"}
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - name: Idempotency-Key
          in: header
          required: true
          schema:
`+schema+`      responses:
        "204": {description: Done.}
`))
			res, err := generateFrom(configFor(t, dir, "openapi.yaml", "client: true\n"))
			if refusal, refused := strings.CutPrefix(tc.want, "refused: "); refused {
				if err == nil || !strings.Contains(err.Error(), refusal) {
					t.Fatalf("got %v; want a refusal with %q", err, refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body := methodSource(t, string(generatedFile(t, res, "idempotency_client.gen.go")), "CreateThing")
			m := keyFormatLiteral.FindStringSubmatch(body)
			switch {
			case tc.want == "" && m != nil:
				t.Fatalf("keys of %s, want random UUIDs", m[0])
			case tc.want != "" && (m == nil || m[1] != tc.want):
				t.Fatalf("want keys of idemclient.KeyFormat%s:\n%s", tc.want, body)
			}
			newKey := idemclient.NewKey
			if m != nil {
				n, _ := strconv.Atoi(m[4])
				newKey = idemclient.KeyFormat{Prefix: m[2], Alphabet: keyAlphabets[m[3]], Len: n}.NewKey
			}
			var re *regexp.Regexp
			if tc.pattern != "" {
				re = regexp.MustCompile(tc.pattern)
			}
			for range 2000 {
				k := newKey()
				if len(k) < tc.minLen || tc.maxLen > 0 && len(k) > tc.maxLen || re != nil && !re.MatchString(k) {
					t.Fatalf("key %q is outside the limits", k)
				}
			}
		})
	}
}

var keyFormatLiteral = regexp.MustCompile(`idemclient\.KeyFormat(\{(?:Prefix: "([^"]*)", )?Alphabet: (idemclient\.\w+), Len: (\d+)\})`)

var keyAlphabets = map[string]string{
	"idemclient.Alphanumeric":      idemclient.Alphanumeric,
	"idemclient.Base64URL":         idemclient.Base64URL,
	"idemclient.LowerAlphanumeric": idemclient.LowerAlphanumeric,
	"idemclient.UpperAlphanumeric": idemclient.UpperAlphanumeric,
	"idemclient.LowerHex":          idemclient.LowerHex,
	"idemclient.UpperHex":          idemclient.UpperHex,
	"idemclient.LowerLetters":      idemclient.LowerLetters,
	"idemclient.UpperLetters":      idemclient.UpperLetters,
	"idemclient.Digits":            idemclient.Digits,
}

// generatedFile is the content of the generated file named name.
func generatedFile(t *testing.T, res *generator.Result, name string) []byte {
	t.Helper()
	for _, f := range res.Files {
		if filepath.Base(f.Path) == name {
			return f.Content
		}
	}
	t.Fatalf("no %s generated", name)
	return nil
}

// methodSource is the doc comment and body of IdempotentClient's method.
func methodSource(t *testing.T, src, method string) string {
	t.Helper()
	start := strings.Index(src, "// "+method+" sends ")
	if start < 0 {
		t.Fatalf("IdempotentClient has no method %s", method)
	}
	end := strings.Index(src[start:], "\n}\n")
	return src[start : start+end+2]
}

// positionOf is "spec:line:col" of the first occurrence of text in src.
func positionOf(t *testing.T, spec string, src []byte, text string) string {
	t.Helper()
	i := strings.Index(string(src), text)
	if i < 0 {
		t.Fatalf("%s holds no %q", spec, text)
	}
	line := strings.Count(string(src[:i]), "\n") + 1
	col := i - strings.LastIndex(string(src[:i]), "\n")
	return fmt.Sprintf("%s:%d:%d", spec, line, col)
}

// clientLimitsRun is the test of the generated package: the generated
// client against the generated server, in one process.
const clientLimitsRun = `package gen

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"
)

// service records the key and path parameters each operation's handler
// sees.
type service struct {
	mu   sync.Mutex
	seen map[string][]string // by operation: "key params"
}

func (s *service) record(op, key string, params ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := key
	for _, p := range params {
		seen += " " + fmt.Sprint(p)
	}
	s.seen[op] = append(s.seen[op], seen)
}

func created() CreatedJSONResponse { return CreatedJSONResponse{Id: "x"} }

func (s *service) CreateTransfer(ctx context.Context, at *idem.Attempt[memstore.NoTx], r CreateTransferRequestObject) (CreateTransferResponseObject, error) {
	s.record("CreateTransfer", r.Params.IdempotencyKey, r.AccountId)
	return CreateTransfer201JSONResponse{created()}, nil
}

func (s *service) ReverseTransfer(ctx context.Context, at *idem.Attempt[memstore.NoTx], r ReverseTransferRequestObject) (ReverseTransferResponseObject, error) {
	s.record("ReverseTransfer", r.Params.IdempotencyKey, r.AccountId, r.TransferId)
	return ReverseTransfer201JSONResponse{created()}, nil
}

func (s *service) Schedule(ctx context.Context, at *idem.Attempt[memstore.NoTx], r ScheduleRequestObject) (ScheduleResponseObject, error) {
	s.record("Schedule", r.Params.IdempotencyKey, r.At.UTC().Format(time.RFC3339))
	return Schedule201JSONResponse{created()}, nil
}

func (s *service) CloseDay(ctx context.Context, at *idem.Attempt[memstore.NoTx], r CloseDayRequestObject) (CloseDayResponseObject, error) {
	s.record("CloseDay", string(r.Params.IdempotencyKey), r.Day.String())
	return CloseDay201JSONResponse{created()}, nil
}

func (s *service) CreatePayout(ctx context.Context, at *idem.Attempt[memstore.NoTx], r CreatePayoutRequestObject) (CreatePayoutResponseObject, error) {
	s.record("CreatePayout", r.Params.IdempotencyKey)
	return CreatePayout201JSONResponse{created()}, nil
}

func (s *service) CreateRefund(ctx context.Context, at *idem.Attempt[memstore.NoTx], r CreateRefundRequestObject) (CreateRefundResponseObject, error) {
	key := "<none>"
	if r.Params.IdempotencyKey != nil {
		key = *r.Params.IdempotencyKey
	}
	s.record("CreateRefund", key)
	return CreateRefund201JSONResponse{created()}, nil
}

func (s *service) PutSetting(ctx context.Context, at *idem.Attempt[memstore.NoTx], r PutSettingRequestObject) (PutSettingResponseObject, error) {
	s.record("PutSetting", "", r.Key, r.Opts, r.Editors)
	return PutSetting201JSONResponse{created()}, nil
}

func (s *service) ResetDevice(ctx context.Context, at *idem.Attempt[memstore.NoTx], r ResetDeviceRequestObject) (ResetDeviceResponseObject, error) {
	s.record("ResetDevice", "", r.DeviceId)
	return ResetDevice201JSONResponse{created()}, nil
}

func (s *service) CreateNote(ctx context.Context, at *idem.Attempt[memstore.NoTx], r CreateNoteRequestObject) (CreateNoteResponseObject, error) {
	s.record("CreateNote", "")
	return CreateNote201JSONResponse{created()}, nil
}

func TestKeysWithinLimits(t *testing.T) {
	svc := &service{seen: map[string][]string{}}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := NewIdempotentClient(c, idemclient.Options{})
	ctx := context.Background()
	account := openapi_types.UUID{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	transfer := openapi_types.UUID{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	when := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	day := openapi_types.Date{Time: time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)}
	amount := Amount{Cents: 5}
	device := uuid.MustParse("3f1e6a52-8c1d-4f7e-9b2a-0c4d5e6f7a8b")
	ops := []struct {
		name           string
		minLen, maxLen int    // 0: none
		pattern        string // "": none
		params         string // the path parameters the handler must see, each after a space
		call           func() (int, idemclient.Call, error)
	}{
		{"CreateTransfer", 0, 20, "", " " + account.String(), func() (int, idemclient.Call, error) {
			resp, call, err := client.CreateTransfer(ctx, account, &CreateTransferParams{}, amount)
			return status(resp), call, err
		}},
		{"ReverseTransfer", 40, 0, "", " " + account.String() + " " + transfer.String(), func() (int, idemclient.Call, error) {
			resp, call, err := client.ReverseTransfer(ctx, account, transfer, &ReverseTransferParams{})
			return status(resp), call, err
		}},
		{"Schedule", 0, 0, "^[A-Za-z0-9]{16,20}$", " 2025-03-04T05:06:07Z", func() (int, idemclient.Call, error) {
			resp, call, err := client.Schedule(ctx, when, &ScheduleParams{}, amount)
			return status(resp), call, err
		}},
		{"CloseDay", 0, 0, "^idem_[a-z0-9]{24}$", " 2025-03-04", func() (int, idemclient.Call, error) {
			resp, call, err := client.CloseDay(ctx, day, &CloseDayParams{})
			return status(resp), call, err
		}},
		{"CreatePayout", 0, 12, "", "", func() (int, idemclient.Call, error) {
			resp, call, err := client.CreatePayout(ctx, &CreatePayoutParams{}, amount)
			return status(resp), call, err
		}},
		{"CreateRefund", 8, 64, "^[a-z0-9-]+$", "", func() (int, idemclient.Call, error) {
			resp, call, err := client.CreateRefund(ctx, &CreateRefundParams{})
			return status(resp), call, err
		}},
		// Path parameters named like the locals of the method.
		{"PutSetting", 0, 0, "", " k1 o1 e1", func() (int, idemclient.Call, error) {
			resp, call, err := client.PutSetting(ctx, "k1", "o1", "e1")
			return status(resp), call, err
		}},
		{"ResetDevice", 0, 0, "", " " + device.String(), func() (int, idemclient.Call, error) {
			resp, call, err := client.ResetDevice(ctx, device)
			return status(resp), call, err
		}},
		{"CreateNote", 0, 0, "", "", func() (int, idemclient.Call, error) {
			resp, call, err := client.CreateNote(ctx)
			return status(resp), call, err
		}},
	}
	const calls = 40
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			var re *regexp.Regexp
			if op.pattern != "" {
				re = regexp.MustCompile(op.pattern)
			}
			keys := map[string]bool{}
			var want []string
			for range calls {
				code, call, err := op.call()
				if err != nil || code != 201 {
					t.Fatalf("call with key %q: status %d, %v; want 201", call.Key, code, err)
				}
				k := call.Key
				if len(k) < op.minLen || op.maxLen > 0 && len(k) > op.maxLen || re != nil && !re.MatchString(k) {
					t.Fatalf("key %q outside the limits (minLength %d, maxLength %d, pattern %q)", k, op.minLen, op.maxLen, op.pattern)
				}
				if keys[k] {
					t.Fatalf("key %q sent for two calls", k)
				}
				keys[k] = true
				if op.name == "CreateNote" || op.name == "PutSetting" || op.name == "ResetDevice" {
					k = "" // the operation declares no key parameter to see it by
				}
				want = append(want, k+op.params)
			}
			svc.mu.Lock()
			defer svc.mu.Unlock()
			if got := svc.seen[op.name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the handler saw\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func status(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
`
