package ipset

import "testing"

func TestNamesFileAndChangesNothing(t *testing.T) {
	for _, tt := range []struct {
		args          []string
		file, nothing bool
	}{
		{[]string{"add", "s", "192.0.2.1"}, false, false},
		{[]string{"save", "-file", "x"}, true, true},
		{[]string{"--file", "x", "restore"}, true, false},
		{[]string{"-f", "x", "save"}, true, true},
		{[]string{"test", "s", "192.0.2.1"}, false, true},
		{[]string{"list", "-n"}, false, true},
		{[]string{"del", "s", "192.0.2.1", "-exist"}, false, false},
		{[]string{"bogus"}, false, true},
		{[]string{"destroy", "s"}, false, false},
	} {
		if got := NamesFile(tt.args); got != tt.file {
			t.Errorf("NamesFile(%q) = %v, want %v", tt.args, got, tt.file)
		}
		if got := ChangesNothing(tt.args); got != tt.nothing {
			t.Errorf("ChangesNothing(%q) = %v, want %v", tt.args, got, tt.nothing)
		}
	}
}
