package generator

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// ClientCode exposes clientCode to the tests of the augmented spec.
var ClientCode = clientCode

// WithClock makes m number dbmate's migrations by now.
func WithClock(m Migrations, now func() time.Time) Migrations {
	m.now = now
	return m
}

// FingerprintCheck is one annotated operation's fingerprint, two ways.
type FingerprintCheck struct {
	GoName string // the request object is GoName + "RequestObject"
	// Writer calls the generated writer; Reference calls idem.Fingerprint
	// as the generated code did before it had writers. Both are
	// expressions over ctx, request and, for multipart bodies,
	// multipartParts.
	Writer, Reference string
	Multipart         bool
}

// FingerprintChecks lists res's annotated operations.
func FingerprintChecks(res *Result) []FingerprintCheck {
	var checks []FingerprintCheck
	for _, op := range res.model.Operations {
		if !op.Idempotent {
			continue
		}
		src := op.Fingerprint
		body := "nil"
		switch {
		case len(src.Body) == 1 && src.Body[0].Name == "":
			body = src.Body[0].Expr
		case len(src.Body) > 0:
			body = paramsLiteral(src.Body)
		}
		exclude := "nil"
		if len(src.Exclude) > 0 {
			exclude = fmt.Sprintf("%#v", src.Exclude)
		}
		ref := fmt.Sprintf("idem.Fingerprint(%q, %s, %s, %s, %s, %s)", op.Name, paramsLiteral(src.Path), paramsLiteral(src.Query), paramsLiteral(src.Header), body, exclude)
		writer := op.FingerprintWriter + "(ctx, request)"
		if op.Multipart != "" {
			writer = op.FingerprintWriter + "(ctx, request, multipartParts)"
		}
		checks = append(checks, FingerprintCheck{GoName: op.GoName, Writer: writer, Reference: ref, Multipart: op.Multipart != ""})
	}
	return checks
}

func paramsLiteral(parts []fingerprintPart) string {
	if len(parts) == 0 {
		return "nil"
	}
	var kv []string
	for _, p := range parts {
		kv = append(kv, fmt.Sprintf("%q: %s", p.Name, p.Expr))
	}
	return "idem.Params{" + strings.Join(kv, ", ") + "}"
}

// ContractRoundTrip reads the contract back from res's idempotency file
// and renders what it read: the contract as written when reading loses
// nothing.
func ContractRoundTrip(res *Result) (written, reread string, ok bool) {
	for _, f := range res.Files {
		if filepath.Base(f.Path) != layerFile {
			continue
		}
		contracts, ok := parseContract(f.Content)
		if !ok {
			return res.model.Contract, "", false
		}
		return res.model.Contract, renderContract(contracts), true
	}
	return res.model.Contract, "", false
}

// AbandonedSetting is what an operation's model holds of abandoned and
// complete-after.
type AbandonedSetting struct {
	Abandoned     string
	CompleteAfter time.Duration
}

// AbandonedSettings maps res's annotated operations, by name, to what
// their models hold of abandoned and complete-after.
func AbandonedSettings(res *Result) map[string]AbandonedSetting {
	settings := make(map[string]AbandonedSetting)
	for _, op := range res.model.Operations {
		if op.Idempotent {
			settings[op.Name] = AbandonedSetting{op.Abandoned, op.CompleteAfter}
		}
	}
	return settings
}

// RequestSchemas is the document res's gates check requests against, and
// the annotated operations that are checked, by operationId, with their
// method and path; a nil document when none is.
func RequestSchemas(res *Result) (doc []byte, ops map[string][2]string) {
	if res.model.RequestSchemas == nil {
		return nil, nil
	}
	ops = map[string][2]string{}
	for _, op := range res.model.Operations {
		if op.Idempotent && op.Validate {
			ops[op.Name] = [2]string{op.Method, op.Path}
		}
	}
	return res.model.RequestSchemas, ops
}
