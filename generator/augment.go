package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"gopkg.in/yaml.v3"
)

// The names the augmented spec adds under components. They are prefixed
// so as not to meet a spec's own; a spec that has them already is refused.
const (
	problemSchema   = "IdempotencyProblem"
	replayedHeader  = "IdempotentReplayed"
	retryHeader     = "IdempotencyRetryAfter"
	invalidResponse = "IdempotencyInvalidRequest"
	inUseResponse   = "IdempotencyKeyInUse"
	reusedResponse  = "IdempotencyKeyReused"
	storeResponse   = "IdempotencyStoreUnavailable"
	largeResponse   = "IdempotencyBodyTooLarge"
	mediaResponse   = "IdempotencyUnsupportedMediaType"
	failedResponse  = "IdempotencyInternalError"
	shouldRetry     = "IdempotencyShouldRetry"
	notFound        = "IdempotencyAsyncNotFound"
)

// layerAnswer is an answer the layer gives itself, documented on every
// annotated operation.
type layerAnswer struct {
	status, component, title, types, detail string
	retryAfter                              bool // may carry Retry-After
	body                                    bool // only for operations that take a body
}

var layerAnswers = []layerAnswer{
	{"400", invalidResponse, "Invalid request", idem.TypeMissingKey + ", " + idem.TypeInvalidKey + ", " + idem.TypeInvalidScope + " or " + idem.TypeInvalidRequest, "the Idempotency-Key, the scope or the request is missing or malformed; nothing was run", false, false},
	{"409", inUseResponse, "Idempotency-Key in use", idem.TypeKeyInUse, "a request with this key is still running; retry after Retry-After with the same key", true, false},
	{"413", largeResponse, "Body too large", idem.TypeBodyTooLarge, "the request body is over the operation's limit; nothing was run", false, true},
	{"415", mediaResponse, "Unsupported media type", idem.TypeUnsupportedMediaType, "the request body is of a media type the operation does not take; nothing was run", false, true},
	{"422", reusedResponse, "Idempotency-Key reused", idem.TypeKeyReused, "the key was used for a different request; send a new key for a new request", false, false},
	{"500", failedResponse, "Attempt failed", idem.TypeInternal + ", " + idem.TypeCommitFailed + ", " + idem.TypeTransactionConflict + ", " + idem.TypeLeaseOverrun + ", " + idem.TypeStoreMisconfigured + " or " + idem.TypeAttemptAbandoned, "the attempt failed and nothing of it was stored, unless the detail names steps kept; a retry with the same key runs or resumes it", true, false},
	{"503", storeResponse, "Key store unavailable", idem.TypeStoreUnavailable + " or " + idem.TypeStoreBusy, "retry after Retry-After with the same key", true, false},
}

// augmentSpec returns a copy of the spec, in its own format (YAML or
// JSON), in which every annotated operation documents the protocol for
// clients and docs: the Idempotency-Key header parameter, unless the
// operation declares its own; the layer's answers (layerAnswers), in
// problem+json or the config's error shape, beside any answer the
// operation declares for the same status; Idempotent-Replayed on its
// success responses; and the headers the answers may carry. It carries
// the resolutions that let oapi-codegen generate the server (carry), and
// resolves what else keeps oapi-codegen's client of the copy from
// compiling (augmentedClient), returning those resolutions. Everything
// else is left as it was.
func augmentSpec(file string, src []byte, m *model, carry carried) ([]byte, []resolution, error) {
	doc, err := annotation.Parse(file, src)
	if err != nil {
		return nil, nil, err
	}
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("%s: the document is not a mapping", file)
	}
	carry.apply(root)
	paths := get(root, "paths")
	for _, op := range m.Operations {
		if !op.Idempotent {
			continue
		}
		node := get(get(paths, op.Path), strings.ToLower(op.Method))
		if node == nil || node.Kind != yaml.MappingNode {
			return nil, nil, fmt.Errorf("%s: %s %s: the operation is not in paths as written (a $ref path item?); the augmented spec needs it inline", file, op.Method, op.Path)
		}
		augmentOperation(root, node, op, m.ErrorShape)
		if op.Async {
			augmentAsync(paths, node, op)
		}
	}
	if err := addComponents(root, file, m.ErrorShape); err != nil {
		return nil, nil, err
	}
	if m.Async {
		if err := addAsyncComponents(root, file, m.ErrorShape); err != nil {
			return nil, nil, err
		}
	}
	asJSON := bytes.HasPrefix(bytes.TrimLeft(src, " \t\r\n\xef\xbb\xbf"), []byte("{"))
	encode := func() ([]byte, error) {
		out, err := encodeSpec(doc, root, asJSON)
		if err != nil {
			return nil, fmt.Errorf("%s: write the augmented spec: %w", file, err)
		}
		return out, nil
	}
	found, err := augmentedClient(file, root, encode)
	if err != nil {
		return nil, nil, err
	}
	out, err := encode()
	if err != nil {
		return nil, nil, err
	}
	return out, found, validateSpec(file, src, out)
}

// encodeSpec writes the document doc, whose mapping is root, as JSON or
// as YAML.
func encodeSpec(doc, root *yaml.Node, asJSON bool) ([]byte, error) {
	if asJSON {
		return encodeJSON(root)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func augmentOperation(root, node *yaml.Node, op operation, shape *Errors) {
	switch {
	case len(op.KeyFrom) > 0:
		describeKey(node, op)
	case !op.KeyDeclared:
		params := get(node, "parameters")
		if params == nil {
			params = &yaml.Node{Kind: yaml.SequenceNode}
			set(node, "parameters", params)
		}
		params.Content = append(params.Content, keyParameter(op))
	}
	responses := get(node, "responses")
	if responses == nil {
		responses = &yaml.Node{Kind: yaml.MappingNode}
		set(node, "responses", responses)
	}
	for i := 0; i+1 < len(responses.Content); i += 2 {
		status := responses.Content[i].Value
		if len(status) == 3 && status[0] == '2' {
			addHeader(responses.Content[i+1], idem.HeaderReplayed, replayedHeader)
		}
	}
	for _, a := range layerAnswers {
		if a.body && len(op.Accept) == 0 {
			continue
		}
		own := get(responses, a.status)
		if own == nil {
			set(responses, a.status, ref("#/components/responses/"+a.component))
			continue
		}
		// The operation's own answer stays; the layer's is added beside
		// it, in a copy when the answer is a shared one.
		for i := 0; i+1 < len(responses.Content); i += 2 {
			if responses.Content[i].Value == a.status {
				responses.Content[i+1] = withLayerAnswer(root, own, a, shape)
			}
		}
	}
}

// withLayerAnswer returns the operation's own response for a status the
// layer answers too, with the layer's answer added: its media type as a
// second one, or, where the operation declares the same media type with
// another schema, a oneOf of both; and the description says when each is
// sent.
func withLayerAnswer(root, own *yaml.Node, a layerAnswer, shape *Errors) *yaml.Node {
	resp := own
	if r := get(own, "$ref"); r != nil && strings.HasPrefix(r.Value, "#/") {
		resp = copyNode(resolveLocal(root, own))
	}
	if resp == nil || resp.Kind != yaml.MappingNode || get(resp, "$ref") != nil {
		return own // a response in another file: left as it is
	}
	mt, schema := layerContent(shape)
	desc := get(resp, "description")
	if desc == nil {
		desc = str("")
		set(resp, "description", desc)
	}
	desc.Value = strings.TrimSpace(desc.Value + " " + fmt.Sprintf("The idempotency layer also answers %s with %s (%s): %s.", a.status, mt, a.types, a.detail))
	content := get(resp, "content")
	if content == nil {
		content = &yaml.Node{Kind: yaml.MappingNode}
		set(resp, "content", content)
	}
	switch media := get(content, mt); {
	case media == nil:
		set(content, mt, mapping("schema", schema))
	case get(media, "schema") == nil:
		set(media, "schema", schema)
	default:
		theirs := get(media, "schema")
		if r := get(theirs, "$ref"); r != nil && r.Value == get(schema, "$ref").Value {
			break // the same schema: nothing to add
		}
		for i := 0; i+1 < len(media.Content); i += 2 {
			if media.Content[i].Value == "schema" {
				media.Content[i+1] = mapping("oneOf", seq(theirs, schema))
			}
		}
	}
	addLayerHeaders(resp, a, shape)
	return resp
}

// layerContent is the media type and schema of the layer's answers.
func layerContent(shape *Errors) (string, *yaml.Node) {
	if shape != nil {
		return shape.mediaType(), ref(shape.Schema)
	}
	return idem.ContentTypeProblem, ref("#/components/schemas/" + problemSchema)
}

// addLayerHeaders declares the headers the layer sends with answer a.
func addLayerHeaders(resp *yaml.Node, a layerAnswer, shape *Errors) {
	if a.retryAfter {
		addHeaderAs(resp, "Retry-After", retryHeader)
	}
	if shape != nil && shape.RetryHeader != "" {
		addHeaderAs(resp, shape.RetryHeader, shouldRetry)
	}
}

// copyNode is a deep copy of n.
func copyNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = copyNode(k)
	}
	return &c
}

// keyParameter is the Idempotency-Key header parameter of op.
func keyParameter(op operation) *yaml.Node {
	lo, hi := max(op.KeyMinLen, 1), idem.MaxKeyLen
	if op.KeyMaxLen > 0 {
		hi = op.KeyMaxLen
	}
	desc := fmt.Sprintf("A unique key for this request, such as a UUID. A retry with the same key and request "+
		"returns the first response (with Idempotent-Replayed: true) instead of running it again; "+
		"the key with another request is a 422. Responses are kept %s.", durationText(op.TTL))
	if op.KeyOptional {
		desc += " Without a key the request runs without this protection."
	}
	schema := mapping("type", str("string"), "minLength", num(lo), "maxLength", num(hi))
	if op.KeyPattern != "" {
		set(schema, "pattern", str(op.KeyPattern))
	}
	return mapping(
		"name", str(idem.HeaderKey),
		"in", str("header"),
		"required", boolean(!op.KeyOptional),
		"description", str(desc),
		"schema", schema,
	)
}

// addHeader declares header name on a response, unless it does already.
func addHeader(resp *yaml.Node, name, component string) { addHeaderAs(resp, name, component) }

// addHeaderAs declares header name, documented by the header component,
// on a response, unless it does already.
func addHeaderAs(resp *yaml.Node, name, component string) {
	if resp.Kind != yaml.MappingNode || get(resp, "$ref") != nil {
		return // a shared response: documented where it is defined
	}
	headers := get(resp, "headers")
	if headers == nil {
		headers = &yaml.Node{Kind: yaml.MappingNode}
		set(resp, "headers", headers)
	}
	if get(headers, name) == nil {
		set(headers, name, ref("#/components/headers/"+component))
	}
}

// addComponents adds the shared problem schema, responses and headers.
func addComponents(root *yaml.Node, file string, shape *Errors) error {
	components := get(root, "components")
	if components == nil {
		components = &yaml.Node{Kind: yaml.MappingNode}
		set(root, "components", components)
	}
	mt, schema := layerContent(shape)
	add := map[string][][2]any{
		"headers": {
			{replayedHeader, mapping("description", str("true when the response is the stored answer to an earlier request with the same Idempotency-Key."), "schema", mapping("type", str("string"), "enum", seq(str("true"))))},
			{retryHeader, mapping("description", str("Seconds to wait before retrying with the same Idempotency-Key."), "schema", mapping("type", str("integer"), "minimum", num(1)))},
		},
	}
	if shape == nil {
		add["schemas"] = [][2]any{{problemSchema, mapping(
			"type", str("object"),
			"description", str("An RFC 9457 problem. type is one of the URIs documented at "+strings.TrimSuffix(idem.ProblemBase, "#")+"; detail says what to do next."),
			"required", seq(str("type"), str("title"), str("status")),
			"properties", mapping(
				"type", mapping("type", str("string"), "format", str("uri")),
				"title", mapping("type", str("string")),
				"status", mapping("type", str("integer")),
				"detail", mapping("type", str("string")),
			),
		)}}
	} else if shape.RetryHeader != "" {
		add["headers"] = append(add["headers"], [2]any{shouldRetry, mapping(
			"description", str("Whether retrying the request with the same Idempotency-Key is right: true for a 409, a 503 and a failed attempt, false for a mistake in the request."),
			"schema", mapping("type", str("string"), "enum", seq(str("true"), str("false"))),
		)})
	}
	for _, a := range layerAnswers {
		r := mapping(
			"description", str(fmt.Sprintf("%s (%s): %s.", a.title, a.types, a.detail)),
			"content", mapping(mt, mapping("schema", copyNode(schema))),
		)
		addLayerHeaders(r, a, shape)
		add["responses"] = append(add["responses"], [2]any{a.component, r})
	}
	for _, section := range []string{"schemas", "headers", "responses"} {
		if len(add[section]) == 0 {
			continue
		}
		sec := get(components, section)
		if sec == nil {
			sec = &yaml.Node{Kind: yaml.MappingNode}
			set(components, section, sec)
		}
		for _, kv := range add[section] {
			name := kv[0].(string)
			if get(sec, name) != nil {
				return fmt.Errorf("%s: components.%s.%s exists already; the augmented spec adds its own there, so rename yours", file, section, name)
			}
			set(sec, name, kv[1].(*yaml.Node))
		}
	}
	return nil
}

// validateSpec checks the augmented spec with kin-openapi, so that what
// clients and docs read is a valid document. A spec that is not valid
// itself cannot give a valid copy: then the copy must only load, as the
// input did.
func validateSpec(file string, in, out []byte) error {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(out)
	if err != nil {
		return fmt.Errorf("%s: the augmented spec does not load (a generator bug; please report it with your spec): %w", file, err)
	}
	err = doc.Validate(loader.Context, openapi3.DisableExamplesValidation())
	if err == nil {
		return nil
	}
	if orig, lerr := loader.LoadFromData(in); lerr == nil && orig.Validate(loader.Context, openapi3.DisableExamplesValidation()) != nil {
		return nil // invalid before it was augmented
	}
	return fmt.Errorf("%s: the augmented spec is not valid (a generator bug; please report it with your spec): %w", file, err)
}

func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func set(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, str(key), v)
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func num(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}
func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}
func ref(to string) *yaml.Node { return mapping("$ref", str(to)) }

func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		set(m, kv[i].(string), kv[i+1].(*yaml.Node))
	}
	return m
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Content: items}
}

// encodeJSON writes a node tree as indented JSON, keys in their order.
func encodeJSON(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, n, ""); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, n *yaml.Node, indent string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	inner := indent + "  "
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			buf.WriteString("{}")
			return nil
		}
		buf.WriteString("{\n")
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteString(",\n")
			}
			key, _ := json.Marshal(n.Content[i].Value)
			buf.WriteString(inner)
			buf.Write(key)
			buf.WriteString(": ")
			if err := writeJSON(buf, n.Content[i+1], inner); err != nil {
				return err
			}
		}
		buf.WriteString("\n" + indent + "}")
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			buf.WriteString("[]")
			return nil
		}
		buf.WriteString("[\n")
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteString(",\n")
			}
			buf.WriteString(inner)
			if err := writeJSON(buf, c, inner); err != nil {
				return err
			}
		}
		buf.WriteString("\n" + indent + "]")
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float", "!!bool":
			buf.WriteString(n.Value)
		case "!!null":
			buf.WriteString("null")
		default:
			s, _ := json.Marshal(n.Value)
			buf.Write(s)
		}
	default:
		return fmt.Errorf("cannot write a YAML node of kind %d as JSON", n.Kind)
	}
	return nil
}
