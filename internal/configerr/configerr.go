// Package configerr makes the *policy.ConfigError that a layer's
// constructor returns for a field it cannot accept: one shape for every
// layer, named as the user writes the field.
package configerr

import (
	"errors"
	"strings"

	"github.com/retrystack/retrystack/policy"
)

// For returns the maker of the errors of one configuration's fields: the
// error's Field is prefix followed by the field's name ("hedge.Config." and
// "Delay"; "" for a prefix the field's name already carries).
func For(prefix string) func(field string, value any, reason string) error {
	return func(field string, value any, reason string) error {
		return &policy.ConfigError{Field: prefix + field, Value: value, Reason: reason}
	}
}

// Rebase renames the field of the *policy.ConfigError in err, when its
// Field starts with from, as a field under to: the path from the value a
// caller passed, when a constructor validated a value made from it
// ("policy.Policy." under "engine.Config.Policy."). Other errors are
// returned as they are.
func Rebase(err error, from, to string) error {
	if ce, ok := errors.AsType[*policy.ConfigError](err); ok && strings.HasPrefix(ce.Field, from) {
		ce.Field = to + strings.TrimPrefix(ce.Field, from)
	}
	return err
}
