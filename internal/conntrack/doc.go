// Package conntrack is the part of `xfw conntrack` that needs no kernel:
// the connection as conntrack-tools shows it (Conn), the listing line of
// `conntrack -L` (Format), the command line of conntrack(8) (ParseArgs) and
// the filter it builds (Filter). Reading and deleting the data plane's
// connection tables is internal/dataplane's (conntrack.go).
//
// The formats are those of conntrack-tools 1.4.7 with libnetfilter_conntrack
// 1.0.9, as observed against the kernel's tables.
//
// # Imports
//
// conntrack imports iptables only, for its protocol names (-p). The data
// plane (internal/dataplane, which reads its tables into Conn values) and
// the CLI (internal/cli) import it.
package conntrack
