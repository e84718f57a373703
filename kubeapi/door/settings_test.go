package door_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/kubeapi/door"
)

// TestSettingsValidate checks that Validate returns every error of the
// settings at once, each naming its flag, and nothing for valid ones.
func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error, each on its own; none: valid
	}{
		{"Defaults", nil, nil},
		{"Socket", []string{"--kube-api-socket", "/run/k.sock"}, nil},
		{"HTTPS", []string{"--kube-api-address", ":0", "--kube-api-tls-cert-file", "c", "--kube-api-tls-private-key-file", "k", "--kube-api-client-ca-file", "ca"}, nil},
		{"AddressWithoutCert", []string{"--kube-api-address", ":0"}, []string{"--kube-api-address needs --kube-api-tls-cert-file"}},
		{"CertWithoutAddress", []string{"--kube-api-tls-cert-file", "c"}, []string{"need --kube-api-address"}},
		{"ClientCAOnSocket", []string{"--kube-api-socket", "/run/k.sock", "--kube-api-client-ca-file", "ca"}, []string{"--kube-api-client-ca-file needs --kube-api-address"}},
		{"SocketTooLong", []string{"--kube-api-socket", "/" + strings.Repeat("s", 200)}, []string{"--kube-api-socket /sss"}},
		{"EveryError", []string{"--kube-api-address", ":0", "--kube-api-authentication-cache-ttl", "0s", "--kube-api-authorization-cache-authorized-ttl", "-1s", "--kube-api-authorization-cache-unauthorized-ttl", "-1m"}, []string{
			"--kube-api-address needs", "--kube-api-authentication-cache-ttl must be positive",
			"--kube-api-authorization-cache-authorized-ttl must be positive", "--kube-api-authorization-cache-unauthorized-ttl must be positive",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s door.Settings
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			s.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := s.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != len(tc.want) {
				t.Errorf("Validate() has %d errors, want %d: %v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
}
