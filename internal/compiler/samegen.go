package compiler

import (
	"fmt"
	"reflect"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Reusing the running generation: a restore whose ruleset is, rule for
// rule, the running one (kube-proxy's periodic syncs rewrite KUBE-SERVICES
// and the filter table unchanged) needs no compile, since Compile is a
// function of the ruleset, the interfaces and the sets' counting
// (Options). The command installs the running generation, read back from
// the data plane, as a new one instead (cli). DiffGenerations is the check
// that such a read-back generation is what Compile makes: tests and
// XFW_CHECK_REUSE compare the two field by field.

// UsesSetMatches reports whether a rule of rs (any table) has a set match
// or a header condition the data plane resolves through the sets' lookup
// tables, or a -j SET target (which writes a set's table): the generation
// then depends on the sets' definitions (Options.SetCounts, the written
// sets' types), not on the ruleset alone.
func UsesSetMatches(rs *ir.Ruleset) bool {
	return anyRule(rs, func(r *ir.Rule) bool { return hasSetMatch(r) || r.Target.Kind == ir.TargetSet })
}

// DiffGenerations returns nil when a and b are the same generation, or an
// error naming the first field that differs. Entry conditions are not
// compared (the data plane keeps the classes they became, which are), nor
// are nil and empty slices or maps told apart. Every field of Generation
// is compared, the unexported ones too, so a field added later is covered
// without a change here.
func DiffGenerations(a, b *Generation) error {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := va.Type()
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Name
		fa, fb := va.Field(i), vb.Field(i)
		if name == "SmallWritten" || name == "runs" {
			continue // a record of changes, not of what the generation is
		}
		if name == "Entries" {
			if err := diffEntries(a.Entries, b.Entries); err != nil {
				return err
			}
			continue
		}
		if name == "ClassChunks" {
			// The rows, not how they are blocked: a generation
			// read back holds its table in one block.
			if !a.ClassChunks.Equal(&b.ClassChunks) {
				return fmt.Errorf("generations differ in %s", name)
			}
			continue
		}
		if !sameValue(fa, fb) {
			return fmt.Errorf("generations differ in %s", name)
		}
	}
	return nil
}

// diffEntries compares two entry lists but for their conditions.
func diffEntries(a, b []Entry) error {
	if len(a) != len(b) {
		return fmt.Errorf("generations differ in Entries: %d and %d entries", len(a), len(b))
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Rule != y.Rule || x.Action != y.Action || x.Flags != y.Flags || x.Aux != y.Aux || x.Next != y.Next {
			return fmt.Errorf("generations differ in Entries: entry %d: rule %d action %d flags %#x aux %d next %d, and rule %d action %d flags %#x aux %d next %d",
				i, x.Rule, x.Action, x.Flags, x.Aux, x.Next, y.Rule, y.Action, y.Flags, y.Aux, y.Next)
		}
	}
	return nil
}

// sameValue is reflect.DeepEqual but for nil and empty slices and maps,
// which it takes as equal (a generation read back has empty ones where
// Compile leaves nil), also inside structs and arrays. Values reached
// through unexported fields are compared by their kind's getters.
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		if a.Kind() == reflect.Slice && a.Len() > 0 && a.CanInterface() && plain(a.Type().Elem().Kind()) {
			// The class table's 29M chunk ids: one comparison.
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := 0; i < a.Len(); i++ {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			if w := b.MapIndex(k); !w.IsValid() || !sameValue(a.MapIndex(k), w) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.String:
		return a.String() == b.String()
	default:
		// Functions, channels: a generation holds none.
		return false
	}
}

// plain reports whether values of kind k compare with ==, holding no
// slices, maps or pointers.
func plain(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.String:
		return true
	}
	return false
}
