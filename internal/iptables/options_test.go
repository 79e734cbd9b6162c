package iptables

import (
	"math/rand"
	"testing"
)

// genericOptCheckLoop is generic_opt_check as xshared.c writes it: for
// each option, over each command given.
func genericOptCheckLoop(command, options uint32) *failure {
	for i := 0; i < len(optChars); i++ {
		legal := 0
		for j := range commandsVsOptions {
			if command&(1<<j) == 0 || options&(1<<i) == 0 {
				continue
			}
			if commandsVsOptions[j][i] != 'x' {
				legal = 1
			} else if legal == 0 {
				legal = -1
			}
		}
		if legal == -1 {
			return paramErr("Illegal option `-%c' with this command", optChars[i])
		}
	}
	return nil
}

// TestGenericOptCheckMasks: the masks of genericOptCheck report what
// xshared.c's loop reports, for every option set with each command and
// each pair of commands, and for random sets of commands.
func TestGenericOptCheckMasks(t *testing.T) {
	var commands []uint32
	for j := range commandsVsOptions {
		commands = append(commands, 1<<j)
		for k := j + 1; k < len(commandsVsOptions); k++ {
			commands = append(commands, 1<<j|1<<k)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for range 200 {
		commands = append(commands, rng.Uint32()&(1<<len(commandsVsOptions)-1))
	}
	for _, command := range commands {
		for options := uint32(0); options < 1<<len(optChars); options++ {
			got, want := genericOptCheck(command, options), genericOptCheckLoop(command, options)
			if (got == nil) != (want == nil) || (got != nil && got.msg != want.msg) {
				t.Fatalf("command %#x options %#x: %v, want %v", command, options, got, want)
			}
		}
	}
}
