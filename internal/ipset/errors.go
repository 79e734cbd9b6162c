package ipset

import "fmt"

// Exit statuses of ipset.
const (
	statusOK        = 0
	statusError     = 1 // a command that failed (kernel error, syntax error)
	statusParameter = 2 // the command line is wrong ("Try `ipset help'")
)

// errKind says how ipset reports an error.
type errKind uint8

const (
	// errSyntax is a user-space parse error: status 1, and in restore
	// mode "Error in line N: " before the message; the pending batch is
	// dropped.
	errSyntax errKind = iota
	// errKernel is an error the kernel returns when the command is
	// carried out: status 1, "Error in line N: " in restore mode.
	errKernel
	// errUsage is a command-line error: status 2, the "Try `ipset help'"
	// hint, and no line number in restore mode.
	errUsage
)

// Error is a failure as ipset reports it: Msg is the text after the
// "ipset v7.17: " prefix.
type Error struct {
	Msg  string
	kind errKind
	// noLine: restore prints no "Error in line N: " before it (ipset's
	// port parser reports through another path).
	noLine bool
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

// Status is the exit status ipset exits with.
func (e *Error) Status() int {
	if e.kind == errUsage {
		return statusParameter
	}
	return statusError
}

func syntaxErr(format string, a ...any) *Error {
	return &Error{Msg: "Syntax error: " + fmt.Sprintf(format, a...), kind: errSyntax}
}

func plainSyntaxErr(format string, a ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, a...), kind: errSyntax}
}

func kernelErr(msg string) *Error { return &Error{Msg: msg, kind: errKernel} }

// msgProtocolErr is the kernel's answer to an element of the other family.
var msgProtocolErr = kernelErr(msgProtocol)

func usageErr(format string, a ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, a...), kind: errUsage}
}

// The kernel's messages, as ipset renders its error codes.
const (
	msgSetNotExist      = "The set with the given name does not exist"
	msgSetExists        = "Set cannot be created: set with the same name already exists"
	msgElemExists       = "Element cannot be added to the set: it's already added"
	msgElemMissing      = "Element cannot be deleted from the set: it's not added"
	msgHashFull         = "Hash is full, cannot add more elements"
	msgListFull         = "List is full, cannot add more elements"
	msgInvalidCIDR      = "The value of the CIDR parameter of the IP address is invalid"
	msgNoTimeout        = "Timeout cannot be used: set was created without timeout support"
	msgNoCounters       = "Packet/byte counters cannot be used: set was created without counter support"
	msgNoComment        = "Comment cannot be used: set was created without comment support"
	msgDestroyInUse     = "Set cannot be destroyed: it is in use by a kernel component"
	msgRenameInUse      = "Set cannot be renamed: it is in use by another system"
	msgRenameExists     = "Set cannot be renamed: a set with the new name already exists"
	msgSwapType         = "The sets cannot be swapped: their type does not match"
	msgTypeNotSupported = "Kernel error received: set type not supported"
	msgMemberNotExist   = "Set to be added/deleted/tested as element does not exist."
	msgOutOfRange       = "Element is out of the range of the set"
	msgListLoop         = "Sets with list:set type cannot be added to the set."
	msgRefNotExist      = "The set to which you referred with 'before' or 'after' does not exist."
	msgRefNotInList     = "The set to which you referred with 'before' or 'after' is not added to the set."
	msgSwapSecond       = "Sets cannot be swapped: the second set does not exist"
	msgProtocol         = "Kernel error received: ipset protocol error"
	msgNullElem         = "Null-valued element, cannot be stored in a hash type of set"
)
