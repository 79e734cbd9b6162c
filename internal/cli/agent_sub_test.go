package cli

import (
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestDrainLinksClosed: draining a subscription's channel that the netlink
// package closed returns (a closed channel is always ready: the agent spun
// on it and never saw SIGTERM), as does draining queued events.
func TestDrainLinksClosed(t *testing.T) {
	for _, closed := range []bool{false, true} {
		links := make(chan netlink.LinkUpdate, 4)
		links <- netlink.LinkUpdate{}
		links <- netlink.LinkUpdate{}
		if closed {
			close(links)
		}
		done := make(chan struct{})
		go func() { drainLinks(links); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("closed %v: drainLinks did not return", closed)
		}
		if !closed && len(links) != 0 {
			t.Errorf("%d events left queued", len(links))
		}
	}
}
