package generator

// ClientCode exposes clientCode to the tests of the augmented spec.
var ClientCode = clientCode
