package kubeletgrpc

import "testing"

func TestOlder(t *testing.T) {
	tests := []struct {
		name     string
		rv, have string
		want     bool
	}{
		{name: "lower", rv: "41", have: "42", want: true},
		{name: "lower with fewer digits", rv: "9", have: "10", want: true},
		{name: "equal", rv: "42", have: "42"},
		{name: "higher", rv: "43", have: "42"},
		{name: "static pod: neither", rv: "", have: ""},
		{name: "none sent", rv: "41", have: ""},
		{name: "none received", rv: "", have: "42"},
		{name: "not an integer", rv: "a41", have: "42"},
		{name: "negative", rv: "-1", have: "42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := older(tt.rv, tt.have); got != tt.want {
				t.Errorf("older(%q, %q) = %v, want %v", tt.rv, tt.have, got, tt.want)
			}
		})
	}
}
