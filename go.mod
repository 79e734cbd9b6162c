module github.com/xfw-dev/xfw

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
