package e2enode

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unitRecorder is a unit that records what the shim asked of it.
type unitRecorder struct {
	up    bool
	calls []string
}

func (u *unitRecorder) running() bool { return u.up }
func (u *unitRecorder) stop() error   { u.calls = append(u.calls, "stop"); u.up = false; return nil }
func (u *unitRecorder) start() error  { u.calls = append(u.calls, "start"); u.up = true; return nil }

// TestSystemctl runs the shim's client against its control socket: the
// calls upstream's node e2e tests make, and calls it must refuse.
func TestSystemctl(t *testing.T) {
	u := &unitRecorder{up: true}
	c, err := newControl(filepath.Join(t.TempDir(), "c.sock"), u, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	t.Setenv(controlEnv, c.ln.Addr().String())
	unitRE := regexp.MustCompile(`(kubelet-\w+)`)
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		out       string // a regular expression the output must match
		calls     string
		runningAt bool
	}{
		{"list running", []string{"list-units", "*kubelet*", "--state=running"}, 0, `kubelet-e2enode\.service loaded active running`, "", true},
		{"reset-failed", []string{"reset-failed", "kubelet-e2enode"}, 0, `^$`, "", true},
		{"kill", []string{"kill", "kubelet-e2enode"}, 0, `^$`, "stop", false},
		{"list running, stopped", []string{"list-units", "*kubelet*", "--state=running"}, 0, `^0 loaded units listed`, "", false},
		{"list all, stopped", []string{"list-units", "*kubelet*"}, 0, `kubelet-e2enode\.service loaded failed failed`, "", false},
		{"restart", []string{"restart", "kubelet-e2enode.service"}, 0, `^$`, "stop start", true},
		{"is-active", []string{"is-active", "kubelet-e2enode"}, 0, `^active`, "", true},
		{"another unit", []string{"restart", "containerd"}, 5, `only the unit kubelet-e2enode.service is known`, "", true},
		{"unsupported", []string{"mask", "kubelet-e2enode"}, 1, `mask is not supported`, "", true},
		{"no command", nil, 1, `no command`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u.calls = nil
			var out bytes.Buffer
			code := Systemctl(tc.args, &out)
			if code != tc.code || !regexp.MustCompile(tc.out).MatchString(out.String()) {
				t.Errorf("systemctl %s: exit %d %q, want exit %d matching %q", strings.Join(tc.args, " "), code, out.String(), tc.code, tc.out)
			}
			if got := strings.Join(u.calls, " "); got != tc.calls {
				t.Errorf("unit calls %q, want %q", got, tc.calls)
			}
			if u.up != tc.runningAt {
				t.Errorf("running %v, want %v", u.up, tc.runningAt)
			}
			if tc.args != nil && tc.args[0] == "list-units" && tc.runningAt && unitRE.FindString(out.String())+".service" != Unit {
				t.Errorf("upstream's pattern finds %q in %q", unitRE.FindString(out.String()), out.String())
			}
		})
	}
}
