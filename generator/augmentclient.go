package generator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// clientConfig is the configuration a client team gives oapi-codegen for
// the augmented spec: a client and its models, and no other option.
func clientConfig(pkg string) codegen.Configuration {
	return codegen.Configuration{
		PackageName: pkg,
		Generate:    codegen.GenerateOptions{Client: true, Models: true},
	}
}

// augmentedClient makes oapi-codegen's client of the augmented spec,
// root, compile: it generates the client as clientConfig says, and
// resolves, by changes to root alone, what keeps it from compiling
// (resolve.go with resolveMode.inSpec). The causes are those of the
// server's output that the carried resolutions do not cover: the
// client's own names, and schemas pruned that the server kept by an
// option. It returns the resolutions, and, as warnings too, what it could
// not resolve: the spec stays right, and only that client would not
// compile. encode writes root as the augmented spec.
func augmentedClient(file string, root *yaml.Node, encode func() ([]byte, error)) (found []resolution, err error) {
	src, err := encode()
	if err != nil {
		return nil, err
	}
	load := func() (*openapi3.T, error) { return openapi3.NewLoader().LoadFromData(src) }
	doc, err := load()
	if err != nil {
		return nil, nil // validateSpec says why
	}
	var res resolved
	err = oapiCodegen.use(func() (err error) {
		res, err = generateResolved(file, doc, load, clientConfig("client"), resolveMode{inSpec: true, tree: func() *yaml.Node { return root }})
		return err
	})
	if p := (*codegenPanic)(nil); errors.As(err, &p) {
		return nil, fmt.Errorf("%s: oapi-codegen failed on the augmented spec (panic: %v); please report it with your spec\n%s", file, p.value, p.stack)
	}
	if err != nil {
		return []resolution{{nil, fmt.Sprintf("oapi-codegen cannot generate a client of the augmented spec: %v", err)}}, nil
	}
	res.carry.apply(root)
	return append(res.found, unresolved(res)...), nil
}

// unresolved says what still keeps res.code, oapi-codegen's client of the
// augmented spec, from compiling, as a warning; none when nothing does.
func unresolved(res resolved) []resolution {
	scan := res.scan
	if scan == nil {
		_, err := scanNames("oapi.gen.go", []byte(res.code))
		return []resolution{{nil, fmt.Sprintf("oapi-codegen's client of the augmented spec does not parse: %v", err)}}
	}
	var problems []string
	for _, name := range scan.dups {
		problems = append(problems, name+" is declared twice")
	}
	problems = append(problems, scan.undeclared()...)
	if len(problems) == 0 {
		return nil
	}
	return []resolution{{nil, "oapi-codegen's client of the augmented spec would not compile: " + strings.Join(problems, "; ") +
		"; rename the schemas or operations involved, or generate the client with oapi-codegen options that resolve it"}}
}
