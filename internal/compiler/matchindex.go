package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// matchKey names one match of one rule: the rule and the match's index
// among its matches.
type matchKey struct {
	rule  *ir.Rule
	match int
}

// matchIndex numbers a generation's matches of one stateful kind (limit,
// recent, hashlimit, connlimit, --ctexpire: T is what the generation
// keeps of one) in the order flattening meets them. A rule that user
// chains flatten more than once is one match, as the kernel has one match
// instance.
type matchIndex[T any] struct {
	items []T
	ids   map[matchKey]uint32
}

// index returns the number of match i of rule r, adding item() the first
// time; a match beyond the first max is refused (too many names them in
// the error).
func (x *matchIndex[T]) index(r *ir.Rule, i, max int, tooMany string, item func() T) (uint32, error) {
	key := matchKey{r, i}
	if k, ok := x.ids[key]; ok {
		return k, nil
	}
	if len(x.items) >= max {
		return 0, fmt.Errorf("more than %d %s", max, tooMany)
	}
	if x.ids == nil {
		x.ids = map[matchKey]uint32{}
	}
	k := uint32(len(x.items))
	x.ids[key] = k
	x.items = append(x.items, item())
	return k, nil
}
