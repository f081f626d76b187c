package pgstore

import (
	"context"
	"fmt"
	"math"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
)

var _ idem.AbandonedFinder = (*Store)(nil)

// FindAbandoned lists, for idem.Completer, the in-flight attempts of the
// operations named whose lease passed at least that operation's After
// ago, oldest first, at most limit. It is a plain read: the completer's
// takeover claim, which succeeds only on the row as listed, decides which
// of several instances finishes each.
func (s *Store) FindAbandoned(ctx context.Context, ops []idem.AbandonedAfter, limit int) ([]idem.AbandonedAttempt, error) {
	if len(ops) == 0 || limit <= 0 {
		return nil, nil
	}
	params := dbsqlc.FindAbandonedParams{MaxRows: int32(min(limit, math.MaxInt32))}
	for _, o := range ops {
		params.Operations = append(params.Operations, o.Operation)
		params.AfterMs = append(params.AfterMs, o.After.Milliseconds())
		params.NeedsRequest = append(params.NeedsRequest, o.NeedsRequest)
	}
	var rows []dbsqlc.FindAbandonedRow
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.FindAbandoned(ctx, params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: find abandoned attempts: %w", classify("find abandoned attempts", err))
	}
	found := make([]idem.AbandonedAttempt, len(rows))
	for i, r := range rows {
		found[i] = idem.AbandonedAttempt{
			ID:            idem.ID{Scope: r.Scope, Operation: r.Operation, Key: r.Key},
			Fingerprint:   r.Fingerprint,
			Request:       r.Request,
			RecoveryPoint: r.RecoveryPoint,
			Attempt:       int64(r.Attempt),
			Generation:    r.Generation,
			PerRequest:    r.PerRequest,
		}
	}
	return found, nil
}
