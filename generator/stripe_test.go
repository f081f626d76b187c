package generator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
)

// stripeSpec is the corpus's Stripe spec: 468 operations, 222 of them
// POST with form-encoded bodies.
const stripeSpec = "stripe-openapi__spec3-2023-09.yaml"

// longSpecsEnv, set to 1, runs the corpus tests that take long: building
// all of Stripe's generated code, about a minute here.
const longSpecsEnv = "IDEMGEN_SPECS_LONG"

// TestStripeSpecBuilds generates Stripe's spec with every POST annotated
// x-idempotent: true, which oapi-codegen alone cannot build (two
// declarations named alike, twice over), and runs the protocol over HTTP
// on two of its form operations, POST /v1/customers and /v1/refunds:
// first call, replay, 422, with nested fields (metadata[k]=v, expand[]=a)
// fingerprinted the same in any order and its union fields (metadata,
// address, shipping: an object or the empty string) reaching the handler.
// The protocol runs on the spec cut down to those two operations with
// include-operation-ids; with IDEMGEN_SPECS_LONG=1 it runs on the whole
// spec's package too, which builds and vets it.
func TestStripeSpecBuilds(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(realspecs.Dir(t), stripeSpec))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every POST", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		annotated := strings.ReplaceAll(string(src), "\n    post:\n", "\n    post:\n      x-idempotent: true\n")
		spec := filepath.Join(dir, stripeSpec)
		writeFile(t, spec, []byte(annotated))
		res := generate(t, configFor(t, dir, spec, ""))
		if res.Operations != 468 || res.Idempotent != 222 {
			t.Fatalf("%d operations, %d idempotent; want 468 and 222", res.Operations, res.Idempotent)
		}
		checkDigest(t, "stripe+every-post", res, dir, spec)
		checkRequestSchemas(t, res)
		// Besides the annotations' scope warnings (Stripe's operations
		// require authentication and the annotation sets no scope),
		// one warning per resolution.
		var items, enums int
		for _, w := range res.Warnings {
			msg, ok := strings.CutPrefix(w, spec+":")
			if !ok {
				t.Errorf("warning not at a place in the spec: %s", w)
				continue
			}
			switch _, msg, _ = strings.Cut(msg, ": warning: "); {
			case strings.Contains(msg, "keys are shared by every caller"):
			case strings.HasPrefix(msg, "oapi-codegen gives the items of the array at ") && strings.Contains(msg, "with x-go-type-name, which changes no JSON"):
				items++
			case strings.HasPrefix(msg, "oapi-codegen names 18 constants of enum SourceType (") &&
				strings.Contains(msg, "SourceTypeAchCreditTransfer is SourceTypeAchCreditTransferValue, "):
				enums++
			default:
				t.Errorf("unexpected warning: %.400s", w)
			}
		}
		if items != 13 || enums != 1 {
			t.Errorf("%d warnings of array items renamed and %d of enum constants; want 13 and 1", items, enums)
		}
		if os.Getenv(longSpecsEnv) != "1" {
			t.Logf("building all of Stripe's generated code takes about a minute; set %s=1 to", longSpecsEnv)
			return
		}
		runStripeProtocol(t, res, true)
	})
	t.Run("form protocol", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		annotated := string(src)
		for _, path := range []string{"/v1/customers", "/v1/refunds"} {
			annotated = annotatePost(t, annotated, path)
		}
		spec := filepath.Join(dir, stripeSpec)
		writeFile(t, spec, []byte(annotated))
		res := generate(t, configFor(t, dir, spec, "oapi-codegen:\n  output-options:\n    include-operation-ids: [PostCustomers, PostRefunds]\n"))
		if res.Operations != 2 || res.Idempotent != 2 {
			t.Fatalf("%d operations, %d idempotent; want 2 and 2", res.Operations, res.Idempotent)
		}
		checkDigest(t, "stripe+form-protocol", res, dir, spec)
		runStripeProtocol(t, res, false)
	})
}

// annotatePost adds x-idempotent: true to the post operation of path in
// the Stripe spec src.
func annotatePost(t *testing.T, src, path string) string {
	t.Helper()
	item := strings.Index(src, "\n  "+path+":\n")
	if item < 0 {
		t.Fatalf("no path %s in %s", path, stripeSpec)
	}
	next := strings.Index(src[item+1:], "\n  /")
	post := strings.Index(src[item:], "\n    post:\n")
	if post < 0 || (next >= 0 && post > next+1) {
		t.Fatalf("no post operation of %s in %s", path, stripeSpec)
	}
	at := item + post + len("\n    post:\n")
	return src[:at] + "      x-idempotent: true\n" + src[at:]
}

// runStripeProtocol builds the generated Stripe package with
// stripeProtocolTest and runs it; vet also vets the package.
func runStripeProtocol(t *testing.T, res *generator.Result, vet bool) {
	t.Helper()
	pkg := writeGoPackage(t, res, map[string]string{"stripe_run_test.go": stripeProtocolTest})
	goTest(t, pkg)
	if vet {
		vetGo(t, pkg, "")
	}
}

// stripeProtocolTest runs in the generated package, of the whole spec or
// of the two operations: the service embeds IdempotentServer for the
// operations it does not implement.
const stripeProtocolTest = `package gen

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type service struct {
	IdempotentServer[memstore.NoTx]
	runs     int
	customer *PostCustomersFormdataRequestBody
}

func (s *service) PostCustomers(ctx context.Context, at *idem.Attempt[memstore.NoTx], request PostCustomersRequestObject) (PostCustomersResponseObject, error) {
	s.runs++
	s.customer = request.Body
	return PostCustomers200JSONResponse{Id: "cus_1"}, nil
}

func (s *service) PostRefunds(ctx context.Context, at *idem.Attempt[memstore.NoTx], request PostRefundsRequestObject) (PostRefundsResponseObject, error) {
	s.runs++
	return PostRefunds200JSONResponse{Id: "re_1", Amount: *request.Body.Amount}, nil
}

func TestStripeForms(t *testing.T) {
	svc := &service{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(path, key, form string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed), string(body)
	}

	customer := "name=Jo&email=jo%40example.com&expand%5B%5D=default_source&expand%5B%5D=tax" +
		"&metadata%5Border_id%5D=6735&metadata%5Bchannel%5D=web" +
		"&address%5Bline1%5D=1+Main+St&address%5Bcity%5D=Paris&address%5Bcountry%5D=FR" +
		"&shipping%5Bname%5D=Jo&shipping%5Baddress%5D%5Bcity%5D=Lyon"
	status, replayed, body := send("/v1/customers", "c1", customer)
	if status != 200 || replayed != "" {
		t.Fatalf("first request: %d replayed=%q %s", status, replayed, body)
	}
	first := body
	got := svc.customer
	if got == nil || got.Name == nil || *got.Name != "Jo" || got.Expand == nil || !reflect.DeepEqual(*got.Expand, []string{"default_source", "tax"}) {
		t.Fatalf("the plain fields did not reach the handler: %+v", got)
	}
	if got.Metadata == nil {
		t.Fatal("metadata did not reach the handler")
	}
	metadata, err := got.Metadata.AsPostCustomersFormdataBodyMetadata0()
	if err != nil || !reflect.DeepEqual(map[string]string(metadata), map[string]string{"order_id": "6735", "channel": "web"}) {
		t.Fatalf("metadata reached the handler as %v (%v)", metadata, err)
	}
	if got.Address == nil {
		t.Fatal("address did not reach the handler")
	}
	address, err := got.Address.AsPostCustomersFormdataBodyAddress0()
	if err != nil || address.City == nil || *address.City != "Paris" || address.Line1 == nil || *address.Line1 != "1 Main St" || address.Country == nil || *address.Country != "FR" {
		t.Fatalf("address reached the handler as %+v (%v)", address, err)
	}
	if got.Shipping == nil {
		t.Fatal("shipping did not reach the handler")
	}
	shipping, err := got.Shipping.AsPostCustomersFormdataBodyShipping0()
	if err != nil || shipping.Name != "Jo" || shipping.Address.City == nil || *shipping.Address.City != "Lyon" {
		t.Fatalf("shipping reached the handler as %+v (%v)", shipping, err)
	}

	// The same fields in another order: a replay of the first answer.
	reordered := "metadata%5Bchannel%5D=web&shipping%5Baddress%5D%5Bcity%5D=Lyon&expand%5B%5D=default_source&address%5Bcountry%5D=FR" +
		"&email=jo%40example.com&address%5Bcity%5D=Paris&metadata%5Border_id%5D=6735&expand%5B%5D=tax&shipping%5Bname%5D=Jo" +
		"&address%5Bline1%5D=1+Main+St&name=Jo"
	if status, replayed, body := send("/v1/customers", "c1", reordered); status != 200 || replayed != "true" || body != first {
		t.Fatalf("the same fields in another order: %d replayed=%q %s, want the replay of %s", status, replayed, body, first)
	}
	for _, changed := range []string{
		strings.Replace(customer, "metadata%5Bchannel%5D=web", "metadata%5Bchannel%5D=app", 1),
		strings.Replace(customer, "address%5Bcity%5D=Paris", "address%5Bcity%5D=Lille", 1),
		customer + "&expand%5B%5D=sources",
	} {
		if status, _, body := send("/v1/customers", "c1", changed); status != 422 {
			t.Fatalf("%s under the same key: %d %s, want 422", changed, status, body)
		}
	}
	if svc.runs != 1 {
		t.Fatalf("the handler ran %d times, want once", svc.runs)
	}

	// metadata= clears: the other alternative of the union.
	if status, _, body := send("/v1/customers", "c2", "metadata=&address="); status != 200 {
		t.Fatalf("cleared metadata: %d %s", status, body)
	}
	if cleared, err := svc.customer.Metadata.AsPostCustomersFormdataBodyMetadata1(); err != nil || cleared != "" {
		t.Fatalf("metadata= reached the handler as %q (%v)", cleared, err)
	}
	// A union field that neither alternative takes is a 400 naming it.
	if status, _, body := send("/v1/customers", "c3", "metadata=x"); status != 400 || !strings.Contains(body, "form field metadata ") {
		t.Fatalf("metadata=x: %d %s, want a 400 naming metadata", status, body)
	}

	refund := "charge=ch_1&amount=500&metadata%5Breason_code%5D=dup&expand%5B%5D=charge"
	if status, _, body := send("/v1/refunds", "r1", refund); status != 200 || !strings.Contains(body, ` + "`" + `"amount":500` + "`" + `) {
		t.Fatalf("refund: %d %s", status, body)
	}
	if status, replayed, _ := send("/v1/refunds", "r1", "expand%5B%5D=charge&metadata%5Breason_code%5D=dup&amount=500&charge=ch_1"); status != 200 || replayed != "true" {
		t.Fatalf("the same refund in another order: %d replayed=%q, want a replay", status, replayed)
	}
	if status, _, _ := send("/v1/refunds", "r1", strings.Replace(refund, "amount=500", "amount=501", 1)); status != 422 {
		t.Fatalf("another amount under the same key: %d, want 422", status)
	}
	if svc.runs != 3 {
		t.Fatalf("the handlers ran %d times, want 3", svc.runs)
	}
}
`
