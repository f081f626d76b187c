package generator

import (
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
)

// oapiMu serialises oapi-codegen runs: it keeps its state in package
// variables, so two runs in one process must not overlap.
var oapiMu sync.Mutex

// runOapiCodegen generates models, the std-http server and the strict
// server for the spec, and returns oapi-codegen's definitions of its
// operations, whose Go names the idempotency layer must match.
func runOapiCodegen(specPath string, cfg *Config) (src []byte, defs []codegen.OperationDefinition, err error) {
	oapiMu.Lock()
	defer oapiMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: oapi-codegen failed on this spec (panic: %v); simplify the construct it names or report it upstream\n%s", specPath, p, debug.Stack())
		}
	}()

	spec, err := util.LoadSwaggerWithOverlay(specPath, util.LoadSwaggerWithOverlayOpts{
		// Only local references: generation must not depend on the network.
		AllowRemoteRefsFrom: []string{},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: load spec: %w", specPath, err)
	}
	conf := codegen.Configuration{
		PackageName: cfg.Output.Package,
		Generate: codegen.GenerateOptions{
			StdHTTPServer: true,
			Strict:        true,
			Models:        true,
		},
		OutputOptions: cfg.OapiCodegen.OutputOptions,
	}
	if err := conf.Validate(); err != nil {
		return nil, nil, fmt.Errorf("oapi-codegen options: %w", err)
	}
	code, err := codegen.Generate(spec, conf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: oapi-codegen: %w", specPath, err)
	}
	defs, err = codegen.OperationDefinitions(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: oapi-codegen operations: %w", specPath, err)
	}
	return []byte(code), defs, nil
}
