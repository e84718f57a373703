package budget_test

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/podsapi/podsapi/budget"
)

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		content string
		want    int64
		wantErr bool
	}{
		{"limit", "268435456\n", 256 << 20, false},
		{"no limit", "max\n", 0, false},
		{"no limit, cgroup v1", "9223372036854771712\n", 0, false},
		{"garbage", "lots\n", 0, true},
		{"negative", "-1\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name)
			if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := budget.ReadLimit(file)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Read(%q) = %d, %v; want %d, error %v", tc.content, got, err, tc.want, tc.wantErr)
			}
		})
	}
	if got, err := budget.ReadLimit(filepath.Join(dir, "missing")); got != 0 || err != nil {
		t.Errorf("Read of a missing file = %d, %v; want 0, nil", got, err)
	}
}

func TestSetLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // Restore the limit.
	file := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(file, []byte("536870912\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := float64(512 << 20)
	want := int64(limit * 0.9)
	got, err := budget.SetLimit(0.9, filepath.Join(t.TempDir(), "missing"), file)
	if err != nil || got != want || debug.SetMemoryLimit(-1) != got {
		t.Fatalf("Set = %d, %v; runtime limit %d; want %d", got, err, debug.SetMemoryLimit(-1), want)
	}
	t.Setenv("GOMEMLIMIT", "100MiB")
	debug.SetMemoryLimit(math.MaxInt64)
	if got, _ := budget.SetLimit(0.9, file); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: Set = %d, runtime limit %d; want the operator's limit untouched", got, debug.SetMemoryLimit(-1))
	}
}

func TestSetGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		gogc string
		want bool
	}{
		{name: "default", gogc: "", want: true},
		{name: "the operator's GOGC wins", gogc: "200", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			before := debug.SetGCPercent(100)
			defer debug.SetGCPercent(before)
			if got := budget.SetGCPercent(37); got != tc.want {
				t.Fatalf("SetGCPercent = %v, want %v", got, tc.want)
			}
			want := 100
			if tc.want {
				want = 37
			}
			if got := budget.GCPercent(); got != want {
				t.Errorf("GCPercent = %d, want %d", got, want)
			}
			if got := debug.SetGCPercent(100); got != want {
				t.Errorf("the collector's target is %d, want %d", got, want)
			}
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		name                 string
		limit, divisor, f, c int64
		want                 int64
	}{
		{"no limit gives the ceiling", 0, 8, 4 << 20, 256 << 20, 256 << 20},
		{"the DaemonSet's 230 MiB", 230 << 20, 8, 4 << 20, 256 << 20, 230 << 20 / 8},
		{"a tiny limit gives the floor", 16 << 20, 8, 4 << 20, 256 << 20, 4 << 20},
		{"a huge limit gives the ceiling", 64 << 30, 8, 4 << 20, 256 << 20, 256 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := budget.Share(tt.limit, tt.divisor, tt.f, tt.c); got != tt.want {
				t.Fatalf("Share(%d, %d, %d, %d) = %d, want %d", tt.limit, tt.divisor, tt.f, tt.c, got, tt.want)
			}
		})
	}
}
