package server

// The payment provider's webhook. Its deliveries carry no bearer token:
// they are signed the Standard Webhooks way, and with a webhook secret
// configured each is verified before anything reads it, so that a forged
// event neither runs nor claims its webhook-id. Without a secret nothing
// is verified, so that the route can be tried with curl.

import (
	"bytes"
	"io"
	"net/http"

	"github.com/idemgen/idemgen/idem"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhookPath is receivePaymentEvent's route (openapi.yaml), and
// webhookOperation its name in the strict middlewares.
const (
	webhookPath      = "/webhooks/psp"
	webhookOperation = "ReceivePaymentEvent"
)

// ProblemBadSignature is the type of a delivery whose signature does not
// verify.
const ProblemBadSignature = "https://example.com/problems/bad-signature"

// maxWebhookBody is receivePaymentEvent's max-body (openapi.yaml).
const maxWebhookBody = 64 << 10

// VerifyWebhooks returns next behind the check of the provider's
// signature on POST /webhooks/psp, with secret (whsec_...). It reads the
// body, bounded as the route's gate bounds it, and hands it on whole.
func VerifyWebhooks(secret string, next http.Handler) (http.Handler, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != webhookPath {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
		if err != nil {
			// Over the bound, or cut off: the gate would refuse it too.
			writeProblem(w, &idem.Problem{Type: idem.TypeInvalidRequest, Title: "Invalid request", Status: http.StatusBadRequest,
				Detail: "The event's body could not be read within 64 KiB; nothing was run or stored under its webhook-id."})
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			writeProblem(w, &idem.Problem{Type: ProblemBadSignature, Title: "Bad signature", Status: http.StatusUnauthorized,
				Detail: "The event's webhook-signature does not verify with this API's webhook secret, or its webhook-timestamp is more than five minutes off (" + err.Error() + "); nothing was run or stored under its webhook-id."})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	}), nil
}

func writeProblem(w http.ResponseWriter, p *idem.Problem) {
	_ = idem.Render(nil, p).Write(w) // problem+json, as the API's other answers
}
