package manifest_test

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/manifest"
)

// uuidV5 matches a canonical version 5, RFC 9562 variant UUID.
var uuidV5 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestDerivedUID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                     string
		namespace, pod, nodeName string
		want                     types.UID // Empty: only the format is checked.
		differentFrom            types.UID
	}{
		// The golden values were computed independently, with Python's
		// uuid.uuid5(UUID("b23fc02d-66cf-4945-a6dc-96857c6feb00"), "namespace/name/node").
		{name: "golden default/web", namespace: "default", pod: "web", nodeName: "node-1", want: "c97d5ca2-802d-51fa-90e6-ed8f02aaecc4"},
		{name: "golden kube-system/kube-proxy-node-1", namespace: "kube-system", pod: "kube-proxy-node-1", nodeName: "node-1", want: "a2dd7815-0b83-5925-92f3-8f5c5b418cc6"},
		{name: "other node", namespace: "default", pod: "web", nodeName: "node-2", differentFrom: "c97d5ca2-802d-51fa-90e6-ed8f02aaecc4"},
		{name: "other namespace", namespace: "prod", pod: "web", nodeName: "node-1", differentFrom: "c97d5ca2-802d-51fa-90e6-ed8f02aaecc4"},
		{name: "other name", namespace: "default", pod: "web2", nodeName: "node-1", differentFrom: "c97d5ca2-802d-51fa-90e6-ed8f02aaecc4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := manifest.DerivedUID(tt.namespace, tt.pod, tt.nodeName)
			if !uuidV5.MatchString(string(got)) {
				t.Errorf("DerivedUID = %q, not a canonical version 5 UUID", got)
			}
			if again := manifest.DerivedUID(tt.namespace, tt.pod, tt.nodeName); again != got {
				t.Errorf("DerivedUID not stable: %q, then %q", got, again)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("DerivedUID = %q, want %q", got, tt.want)
			}
			if tt.differentFrom != "" && got == tt.differentFrom {
				t.Errorf("DerivedUID = %q, want a different UID", got)
			}
		})
	}
}
