package generator

// Abandons reports whether an operation's annotation sets abandoned: the
// generated code then has NewIdempotentCompleter.
func (m *model) Abandons() bool {
	for _, op := range m.Operations {
		if op.Abandoned != "" {
			return true
		}
	}
	return false
}
