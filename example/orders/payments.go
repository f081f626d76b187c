package orders

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
)

// Points where the example server can be made to die, to show and test
// what a retry does after a crash (see Service.Crash).
const (
	// CrashAfterClaim: the key is leased, no phase has run.
	CrashAfterClaim = "after-claim"
	// CrashAfterCharge: the provider has charged the card, and the charge
	// is not recorded yet.
	CrashAfterCharge = "after-charge"
	// CrashAfterReceipt: the last phase has staged the receipt's job, and
	// its transaction has not committed.
	CrashAfterReceipt = "after-receipt"
	// CrashBeforeResponse: the response is stored, and not sent yet. The
	// server's handler checks this one, after the protocol has run.
	CrashBeforeResponse = "before-response"
)

// ProblemDeclined is the problem type of a payment the provider declined.
const ProblemDeclined = "https://example.com/problems/payment-declined"

const paymentColumns = `id, order_id, amount_cents, coalesce(charge_id, ''), status`

// payment is a payments row.
type payment struct {
	gen.Payment
	currency string
}

// chargeTimeout bounds the provider's charge call, inside createPayment's
// lease of 5s (openapi.yaml), with a second to spare for the phase's own
// statements.
const chargeTimeout = 4 * time.Second

// CreatePayment is createPayment's first phase: it checks the order and
// records the payment, pending. Its reference is a key derived from the
// request's, which the later phases find it by after any crash.
func (s *Service) CreatePayment(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	s.crash(CrashAfterClaim)
	b := req.Body
	if b.AmountCents <= 0 {
		return gen.CreatePaymentRespond(gen.CreatePayment400ApplicationProblemPlusJSONResponse{
			Type:   ProblemInvalidOrder,
			Title:  "Invalid payment",
			Status: http.StatusBadRequest,
			Detail: ptr(fmt.Sprintf("amount_cents must be positive, got %d; send a new request with a new Idempotency-Key", b.AmountCents)),
		}), nil
	}
	tag, err := at.Tx().Exec(ctx,
		`INSERT INTO payments (account_id, order_id, amount_cents, currency, reference)
		 SELECT account_id, id, $3, currency, $4 FROM orders WHERE id = $1 AND account_id = $2`,
		b.OrderId, req.Params.XAccountId, b.AmountCents, at.DerivedKey("payment"))
	if err != nil {
		return gen.CreatePaymentStep{}, fmt.Errorf("insert payment: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return gen.CreatePaymentRespond(gen.CreatePayment404ApplicationProblemPlusJSONResponse{
			Type:   "https://example.com/problems/not-found",
			Title:  "Order not found",
			Status: http.StatusNotFound,
			Detail: ptr("no order " + b.OrderId + " in this account; check the order_id and the X-Account-Id header, and send a new request with a new Idempotency-Key"),
		}), nil
	}
	return gen.CreatePaymentNext(gen.CreatePaymentPaymentCreated), nil
}

// CreatePaymentAfterPaymentCreated charges the provider and records the
// charge. The provider's Idempotency-Key is derived from the request's, so
// a retry of this phase after a crash gets the first charge back instead
// of making a second one.
func (s *Service) CreatePaymentAfterPaymentCreated(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	p, err := s.payment(ctx, at)
	if err != nil {
		return gen.CreatePaymentStep{}, err
	}
	// The phase's transaction is open while the provider answers: the call
	// must end within the phase's lease, or PostgreSQL ends the
	// transaction and every retry overruns the same way.
	ctx, cancel := context.WithTimeout(ctx, chargeTimeout)
	defer cancel()
	charge, err := s.PSP.Charge(ctx, at.DerivedKey("charge"), psp.ChargeRequest{
		AmountCents: p.AmountCents,
		Currency:    p.currency,
		Reference:   p.Id,
	})
	if err != nil {
		// The phase rolls back and the key is released: a retry charges
		// again with the same provider key, which the provider dedupes.
		return gen.CreatePaymentStep{}, fmt.Errorf("charge payment %s: %w", p.Id, err)
	}
	s.crash(CrashAfterCharge)
	if _, err := at.Tx().Exec(ctx, `UPDATE payments SET charge_id = $2, status = $3 WHERE id = $1`, p.Id, charge.ID, charge.Status); err != nil {
		return gen.CreatePaymentStep{}, fmt.Errorf("record charge of payment %s: %w", p.Id, err)
	}
	return gen.CreatePaymentNext(gen.CreatePaymentChargeCreated), nil
}

// CreatePaymentAfterChargeCreated answers from the recorded payment: 201,
// with the receipt's job staged, or the 402 of a declined charge, which is
// stored and replayed too.
func (s *Service) CreatePaymentAfterChargeCreated(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	p, err := s.payment(ctx, at)
	if err != nil {
		return nil, err
	}
	if p.Status == psp.StatusDeclined {
		return gen.CreatePayment402ApplicationProblemPlusJSONResponse{
			Type:   ProblemDeclined,
			Title:  "Payment declined",
			Status: http.StatusPaymentRequired,
			Detail: ptr(fmt.Sprintf("the card was declined for payment %s (charge %s); ask the customer for another card and send a new request with a new Idempotency-Key", p.Id, p.ChargeId)),
		}, nil
	}
	if s.Jobs != nil {
		// The receipt's job commits with this phase's response, or not at
		// all: a crash before the commit leaves neither, and the retry
		// that runs this phase again stages it once.
		if _, err := s.Jobs.InsertTx(ctx, at.Tx(), SendReceipt{PaymentID: p.Id, AccountID: req.Params.XAccountId}, nil); err != nil {
			return nil, fmt.Errorf("stage the receipt of payment %s: %w", p.Id, err)
		}
		s.crash(CrashAfterReceipt)
	}
	return gen.CreatePayment201JSONResponse{
		Body:    p.Payment,
		Headers: gen.CreatePayment201ResponseHeaders{Location: "/payments/" + p.Id},
	}, nil
}

// payment reads the payment this request's first phase recorded.
func (s *Service) payment(ctx context.Context, at *idem.Attempt[pgx.Tx]) (payment, error) {
	var p payment
	err := at.Tx().QueryRow(ctx, `SELECT `+paymentColumns+`, currency FROM payments WHERE reference = $1`, at.DerivedKey("payment")).
		Scan(&p.Id, &p.OrderId, &p.AmountCents, &p.ChargeId, &p.Status, &p.currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, errors.New("the payment recorded at payment_created is missing")
	}
	if err != nil {
		return p, fmt.Errorf("read payment: %w", err)
	}
	return p, nil
}

// crash ends the process at point when Crash is set for it.
func (s *Service) crash(point string) {
	if s.Crash != nil {
		s.Crash(point)
	}
}
