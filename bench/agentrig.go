package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// agentStartTimeout bounds the wait for a started agent to serve.
const agentStartTimeout = 30 * time.Second

// agentReadyLine is what `xfw agent` logs once it follows the namespace's
// interfaces and serves commands (internal/cli/agent.go).
const agentReadyLine = "following the interfaces"

// xfwAgentFirewall is xfw as installed: the iptables commands go through
// xfw-cmd (what the iptables alternatives link to) to the namespace's
// agent, with XFW_CMDSERVER=only so that a command the agent does not
// serve fails instead of running xfw itself unnoticed.
func xfwAgentFirewall(xfwCmd string) *firewall {
	served := []string{"env", "XFW_CMDSERVER=only", xfwCmd}
	with := func(args ...string) []string { return append(append([]string(nil), served...), args...) }
	return &firewall{
		Name:       fwXFWAgent,
		load:       restoreWith(with("iptables-restore", "-w")...),
		appendRule: appendWith(with("iptables", "-w")...),
		insertRule: ruleCmd("-I", with("iptables", "-w")...),
		deleteRule: ruleCmd("-D", with("iptables", "-w")...),
		reset:      resetWith(with("iptables-restore", "-w")...),
	}
}

// agentRig is a topology whose namespace runs xfw's agent, for the
// commands of xfwAgentFirewall. It has no generator: the update section
// sends no traffic.
type agentRig struct {
	rig
	agent *exec.Cmd
}

// startAgentRig builds a topology, loads an empty ruleset with xfw and
// starts `xfw agent` in its fw namespace. It returns nil, nil when
// xfw-cmd is not beside xfwBin (a bench run with an older results/tmp).
func startAgentRig(ctx context.Context, xfwBin string) (_ *agentRig, err error) {
	xfwCmd := filepath.Join(filepath.Dir(xfwBin), "xfw-cmd")
	if _, err := os.Stat(xfwCmd); err != nil {
		return nil, nil
	}
	t, err := newTopology(ctx, fwXFWAgent)
	if err != nil {
		return nil, err
	}
	r := &agentRig{rig: rig{fw: xfwAgentFirewall(xfwCmd), topo: t}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if err := resetWith(xfwBin, "iptables-restore", "-w")(ctx, t.FwNS); err != nil {
		return nil, fmt.Errorf("%s: first load: %w", fwXFWAgent, err)
	}
	cmd := exec.Command("ip", "netns", "exec", t.FwNS, xfwBin, "agent", "--no-log")
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start the agent: %w", fwXFWAgent, err)
	}
	r.agent = cmd
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), agentReadyLine) {
				found = true
				ready <- true
			}
		}
		if !found {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			return nil, fmt.Errorf("%s: the agent ended before serving", fwXFWAgent)
		}
	case <-time.After(agentStartTimeout):
		return nil, fmt.Errorf("%s: the agent did not serve within %v", fwXFWAgent, agentStartTimeout)
	}
	return r, nil
}

// Close stops the agent (SIGTERM to the process this rig started, then
// its exit awaited) and removes the topology.
func (r *agentRig) Close() {
	if r.agent != nil && r.agent.Process != nil {
		_ = r.agent.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = r.agent.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(helperGrace):
			_ = r.agent.Process.Kill()
			<-done
		}
		r.agent = nil
	}
	r.topo.Close()
}
