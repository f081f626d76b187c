package generator

// FormField is the request object's field that holds the operation's form
// body (Body, or FormdataBody when it takes several kinds of body), for
// idem.BindFormUnions (templates/form.go.tmpl); "" when the operation
// takes no form.
func (op operation) FormField() string {
	for _, ct := range op.Accept {
		if !isForm(ct) {
			continue
		}
		if len(op.Accept) > 1 {
			return "FormdataBody" // oapi-codegen's field for the form of several bodies
		}
		return "Body"
	}
	return ""
}
