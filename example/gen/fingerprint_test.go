package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/randvalue"
)

// The generated fingerprint writers must give the fingerprints that
// idem.Fingerprint gives, byte for byte: keys stored before the writers
// existed must keep matching their requests. idem.Fingerprint is called
// here as the generated code called it before.

func referenceCreateOrder(request CreateOrderRequestObject) ([]byte, error) {
	return idem.Fingerprint("createOrder", nil, nil, idem.Params{"X-Account-Id": request.Params.XAccountId}, request.Body, nil)
}

func referenceCreatePayment(request CreatePaymentRequestObject) ([]byte, error) {
	return idem.Fingerprint("createPayment", nil, nil, idem.Params{"X-Account-Id": request.Params.XAccountId}, request.Body, nil)
}

func sameFingerprint(t *testing.T, request any, got []byte, gotErr error, want []byte, wantErr error) {
	t.Helper()
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%#v: writer error %v, reference error %v", request, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v: writer %x, reference %x", request, got, want)
	}
}

// TestFingerprintWriters compares the writers with the reference over
// random requests.
func TestFingerprintWriters(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for range 2000 {
		var order CreateOrderRequestObject
		randvalue.Fill(r, &order)
		got, gotErr := createOrderFingerprint(ctx, order)
		want, wantErr := referenceCreateOrder(order)
		sameFingerprint(t, order, got, gotErr, want, wantErr)

		var payment CreatePaymentRequestObject
		randvalue.Fill(r, &payment)
		got, gotErr = createPaymentFingerprint(ctx, payment)
		want, wantErr = referenceCreatePayment(payment)
		sameFingerprint(t, payment, got, gotErr, want, wantErr)
	}
}

// FuzzFingerprintWriters decodes requests as the server does, from a
// JSON body and an account header, and compares the two paths.
func FuzzFingerprintWriters(f *testing.F) {
	f.Add([]byte(`{"amount_cents":1250,"currency":"EUR","customer_id":"cus_1"}`), "acct_1")
	f.Add([]byte(`{"amount_cents":-0,"currency":"<&>\u2028","customer_id":"\ud800"}`), "\xff")
	f.Add([]byte(`{"amount_cents":9223372036854775807,"order_id":"o"}`), "")
	f.Add([]byte(`null`), "a")
	f.Fuzz(func(t *testing.T, body []byte, account string) {
		ctx := context.Background()
		var order NewOrder
		if json.Unmarshal(body, &order) == nil {
			request := CreateOrderRequestObject{Params: CreateOrderParams{XAccountId: account}, Body: &order}
			got, gotErr := createOrderFingerprint(ctx, request)
			want, wantErr := referenceCreateOrder(request)
			sameFingerprint(t, request, got, gotErr, want, wantErr)
		}
		var payment NewPayment
		if json.Unmarshal(body, &payment) == nil {
			request := CreatePaymentRequestObject{Params: CreatePaymentParams{XAccountId: account}, Body: &payment}
			got, gotErr := createPaymentFingerprint(ctx, request)
			want, wantErr := referenceCreatePayment(request)
			sameFingerprint(t, request, got, gotErr, want, wantErr)
		}
	})
}
