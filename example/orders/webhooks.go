package orders

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

// EventPaymentSucceeded is the provider's event of a charge made.
const EventPaymentSucceeded = "payment.succeeded"

// ReceivePaymentEvent processes one of the payment provider's events:
// payment.succeeded settles the payment it names, others are
// acknowledged and ignored. The spec keys it by the event's webhook-id, so
// it runs once per event, however often the provider redelivers it; the
// settlement commits with the stored answer, which the redeliveries get.
func (s *Service) ReceivePaymentEvent(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.ReceivePaymentEventRequestObject) (gen.ReceivePaymentEventResponseObject, error) {
	ev := req.Body
	if ev.Type != EventPaymentSucceeded {
		return gen.ReceivePaymentEvent200JSONResponse{Type: ev.Type, Settled: false}, nil
	}
	tag, err := at.Tx().Exec(ctx,
		`INSERT INTO settlements (payment_id, charge_id, webhook_id) SELECT id, $2, $3 FROM payments WHERE id = $1`,
		ev.Data.PaymentId, ev.Data.ChargeId, req.Params.WebhookId)
	if err != nil {
		return nil, fmt.Errorf("settle payment %s: %w", ev.Data.PaymentId, err)
	}
	if tag.RowsAffected() == 0 {
		// Stored like any answer: a redelivery of the event gets it too.
		return gen.ReceivePaymentEvent404ApplicationProblemPlusJSONResponse{
			Type:   "https://example.com/problems/not-found",
			Title:  "Payment not found",
			Status: http.StatusNotFound,
			Detail: ptr("no payment " + ev.Data.PaymentId + "; the event was not for this API"),
		}, nil
	}
	return gen.ReceivePaymentEvent200JSONResponse{Type: ev.Type, PaymentId: &ev.Data.PaymentId, Settled: true}, nil
}

// Settlements counts the times the payment was settled: once, whatever
// the provider redelivered.
func (s *Service) Settlements(ctx context.Context, paymentID string) (int, error) {
	var n int
	err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM settlements WHERE payment_id = $1`, paymentID).Scan(&n)
	return n, err
}
