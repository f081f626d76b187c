package generator

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// clientCode is oapi-codegen's client and models for a spec: what a
// client team generates from the augmented spec.
func clientCode(spec []byte, pkg string) ([]byte, error) {
	oapiMu.Lock()
	defer oapiMu.Unlock()
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	conf := codegen.Configuration{
		PackageName: pkg,
		Generate:    codegen.GenerateOptions{Client: true, Models: true},
	}
	code, err := codegen.Generate(doc, conf)
	if err != nil {
		return nil, fmt.Errorf("oapi-codegen client: %w", err)
	}
	return []byte(code), nil
}
