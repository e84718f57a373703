package kubeapi

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// serveDiscovery answers the discovery document of path, listing the core
// group's v1 and, in it, pods alone (get, list, watch), in JSON: client-go
// and kubectl ask for aggregated discovery first and fall back to these
// documents when answered plain JSON.
func (h *Handler) serveDiscovery(w http.ResponseWriter, r *http.Request, path string) {
	var doc any
	switch path {
	case "/api":
		doc = &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		}
	case "/api/v1":
		doc = &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{{
				Name:         "pods",
				SingularName: "pod",
				Namespaced:   true,
				Kind:         "Pod",
				Verbs:        metav1.Verbs{"get", "list", "watch"},
				ShortNames:   []string{"po"},
				Categories:   []string{"all"},
			}},
		}
	case "/apis":
		doc = &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{},
		}
	case "/version":
		doc = versionInfo(h.version)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		h.writeError(w, r, errInternal())
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// versionInfo returns the /version of gitVersion ("v1.37.2").
func versionInfo(gitVersion string) *version.Info {
	info := &version.Info{GitVersion: gitVersion, GoVersion: goVersion(), Platform: ""}
	major, rest, _ := strings.Cut(strings.TrimPrefix(gitVersion, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	info.Major, info.Minor = major, minor
	return info
}

// defaultVersion returns the Kubernetes version of the module k8s.io/api the
// binary was built with (v0.37.2 is Kubernetes v1.37.2), or "v1.0.0" when
// the build records none.
func defaultVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/api" {
				if v, ok := strings.CutPrefix(d.Version, "v0."); ok {
					return "v1." + v
				}
			}
		}
	}
	return "v1.0.0"
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return ""
}
