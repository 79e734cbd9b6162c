package dataplane

import (
	_ "embed"
)

//go:embed bpf/xfw.o
var objectBytes []byte

// Program names as the kernel keeps them (15 characters at most).
const (
	xdpProgName = "xfw_xdp"
	tcProgName  = "xfw_tc_egress"
	// tcInProgName is the TCX ingress program that sends the REJECT
	// replies the XDP program builds (bpf/reject_send.h).
	tcInProgName = "xfw_tc_ingress"
)
