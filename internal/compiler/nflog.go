package compiler

import (
	"math"

	"github.com/xfw-dev/xfw/internal/ir"
)

// NFLogWhole is LogConfig.NFLogLen of an NFLOG rule without --nflog-size:
// the events carry as much of the packet as they hold (the kernel copies
// what the listener asked for; --nflog-range, which the kernel ignores,
// changes nothing).
const NFLogWhole = math.MaxUint32

// nflogConfigOf returns the data plane's options of an NFLOG target: a
// LOG configuration marked ir.LogFlagNFLog whose events go to the NFLOG
// stream with the group and the copy length.
func nflogConfigOf(o *ir.NFLogOptions) LogConfig {
	lc := LogConfig{Flags: ir.LogFlagNFLog, NFLogLen: NFLogWhole}
	if o == nil {
		return lc
	}
	lc.Prefix, lc.NFLogGroup = o.Prefix, o.Group
	if o.Size {
		lc.NFLogLen = o.Len
	}
	return lc
}
