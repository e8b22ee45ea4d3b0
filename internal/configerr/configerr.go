// Package configerr makes the *policy.ConfigError that a layer's
// constructor returns for a field it cannot accept: one shape for every
// layer, named as the user writes the field.
package configerr

import "github.com/retrystack/retrystack/policy"

// For returns the maker of the errors of one configuration's fields: the
// error's Field is prefix followed by the field's name ("hedge.Config." and
// "Delay"; "" for a prefix the field's name already carries).
func For(prefix string) func(field string, value any, reason string) error {
	return func(field string, value any, reason string) error {
		return &policy.ConfigError{Field: prefix + field, Value: value, Reason: reason}
	}
}
