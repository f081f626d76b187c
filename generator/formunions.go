package generator

// FormBody is the request object's field that holds the operation's form
// body, as an expression of the layer's method (request.Body), for
// idem.BindFormUnions (templates/form.go.tmpl); "" when the operation
// takes no form.
func (op operation) FormBody() string {
	for _, ct := range op.Accept {
		if !isForm(ct) {
			continue
		}
		if len(op.Accept) > 1 {
			return "request.FormdataBody" // oapi-codegen's field for the form of several bodies
		}
		return "request.Body"
	}
	return ""
}
