package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Version is the iptables release whose behaviour and messages this package
// reproduces.
const Version = "1.8.9"

// versionString is what iptables prints after the program name in its error
// messages: "iptables v1.8.9 (legacy): …".
const versionString = "v" + Version + " (legacy)"

// Exit statuses, as iptables' enum xtables_exittype defines them.
const (
	// StatusOther is OTHER_PROBLEM: a command that parsed but could not be
	// carried out (no such chain, kernel refused the table, …).
	StatusOther = 1
	// StatusParameter is PARAMETER_PROBLEM: the command line is wrong.
	StatusParameter = 2
	// StatusVersion is VERSION_PROBLEM: the table cannot be initialised.
	StatusVersion = 3
)

// Error is a failure reported the way iptables reports it. Msg is the exact
// text iptables prints on standard error (possibly several lines, without the
// final newline) and Status the exit status it exits with.
type Error struct {
	Status int
	Msg    string
}

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// ProgramName is the name iptables uses in its messages for the family:
// "iptables" or "ip6tables".
func ProgramName(fam ir.Family) string {
	if fam == ir.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// restoreProgramName is the name iptables-restore uses in its messages.
func restoreProgramName(fam ir.Family) string {
	return ProgramName(fam) + "-restore"
}

// failKind says how a failure is printed.
type failKind uint8

const (
	// failXT is xtables_error(): "<prog> v1.8.9 (legacy): <msg>", plus the
	// "Try `<prog> -h'" hint for parameter problems.
	failXT failKind = iota
	// failBadArg is do_parse's "Bad argument `x'" followed by the hint.
	failBadArg
	// failTryHelp is exit_tryhelp() alone: only the hint.
	failTryHelp
	// failIPTC is a libiptc or kernel error: "iptables: <msg>." from the
	// command, "iptables-restore: line N failed" from iptables-restore.
	failIPTC
	// failPlain is printed as is.
	failPlain
)

// failure is the package-internal error: what went wrong, independent of
// which program (iptables or iptables-restore, which line) reports it.
type failure struct {
	kind   failKind
	status int
	// msg is the text given to xtables_error (it may end in "\n", which
	// iptables prints as an empty line), the argument of "Bad argument", the
	// libiptc message (without the final period) or the plain text.
	msg string
	// notice is printed on standard error before the message.
	notice string
	// dmesg adds " Run `dmesg' for more information." to a libiptc
	// message, as iptables does for EINVAL.
	dmesg bool
}

// Error returns a one-line description, for use inside the package.
func (f *failure) Error() string { return strings.TrimSuffix(f.msg, "\n") }

// paramErr is xtables_error(PARAMETER_PROBLEM, …).
func paramErr(format string, args ...any) *failure {
	return &failure{kind: failXT, status: StatusParameter, msg: fmt.Sprintf(format, args...)}
}

// otherErr is xtables_error(OTHER_PROBLEM, …).
func otherErr(format string, args ...any) *failure {
	return &failure{kind: failXT, status: StatusOther, msg: fmt.Sprintf(format, args...)}
}

// badArg is do_parse's reaction to a stray word on the command line.
func badArg(arg string) *failure {
	return &failure{kind: failBadArg, status: StatusParameter, msg: arg}
}

// iptcErr is a libiptc (or kernel) error with iptc_strerror's text.
func iptcErr(msg string) *failure {
	return &failure{kind: failIPTC, status: StatusOther, msg: msg}
}

// kernelEINVAL is what iptables prints when the kernel rejects a table with
// EINVAL (a match used with the wrong protocol, a hook it is not allowed in…).
func kernelEINVAL() *failure {
	return &failure{kind: failIPTC, status: StatusOther, msg: "Invalid argument", dmesg: true}
}

// kernelELOOP is the kernel's verdict on a table whose chains loop.
func kernelELOOP() *failure {
	return iptcErr("Too many levels of symbolic links")
}

// tryHelp is the bare exit_tryhelp(2).
func tryHelp() *failure {
	return &failure{kind: failTryHelp, status: StatusParameter}
}

// render formats the failure as program prog would print it. line is the
// iptables-restore input line, or 0 for a command.
func (f *failure) render(prog string, line int) *Error {
	var b strings.Builder
	b.WriteString(f.notice)
	hint := func() {
		if line > 0 {
			fmt.Fprintf(&b, "Error occurred at line: %d\n", line)
		}
		fmt.Fprintf(&b, "Try `%s -h' or '%s --help' for more information.\n", prog, prog)
	}
	switch f.kind {
	case failXT:
		fmt.Fprintf(&b, "%s %s: %s\n", prog, versionString, f.msg)
		switch f.status {
		case StatusParameter:
			hint()
		case StatusVersion:
			fmt.Fprintf(&b, "Perhaps %s or your kernel needs to be upgraded.\n", prog)
		}
	case failBadArg:
		fmt.Fprintf(&b, "Bad argument `%s'\n", f.msg)
		hint()
	case failTryHelp:
		hint()
	case failIPTC:
		if line > 0 {
			fmt.Fprintf(&b, "%s: line %d failed\n", prog, line)
			break
		}
		fmt.Fprintf(&b, "%s: %s.", prog, f.msg)
		if f.dmesg {
			b.WriteString(" Run `dmesg' for more information.")
		}
		b.WriteString("\n")
	case failPlain:
		b.WriteString(f.msg)
	}
	return &Error{Status: f.status, Msg: strings.TrimSuffix(b.String(), "\n")}
}

// asError converts an internal failure into the exported Error for a command
// of family fam; other errors pass through.
func asError(fam ir.Family, err error) error {
	if f, ok := err.(*failure); ok {
		return f.render(ProgramName(fam), 0)
	}
	return err
}
