package ir

import "fmt"

// RoundTrip returns r as its binary form gives it back (encoded, then
// decoded as UnmarshalRuleset decodes a rule), with r's Counters and
// Handle, which the binary form does not carry. A resident process that
// keeps the ruleset it committed instead of decoding the saved form again
// (the agent's command cache) puts each rule a command made through it,
// so that the kept ruleset is the one a decode would give.
func (r *Rule) RoundTrip() (*Rule, error) {
	e := &encoder{}
	if err := e.rule(r); err != nil {
		return nil, fmt.Errorf("encode rule: %w", err)
	}
	d := &decoder{buf: e.buf, strs: map[string]string{}}
	out := &Rule{Counters: r.Counters, Handle: r.Handle}
	d.rule(out)
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d bytes after the rule", len(d.buf)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode rule: %w", d.err)
	}
	return out, nil
}
