package kubeapi_test

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/podsapi/podsapi/kubeapi"
)

// TestLocal pins which requests the handler answers itself and the rights
// each needs.
func TestLocal(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	pods := func(verb, ns, name string) []kubeapi.Access {
		return []kubeapi.Access{{Verb: verb, Namespace: ns, Resource: "pods", Name: name}}
	}
	selected := func(verb, ns, fields, labels string) []kubeapi.Access {
		return []kubeapi.Access{{Verb: verb, Namespace: ns, Resource: "pods", FieldSelector: fields, LabelSelector: labels}}
	}
	kubelet := []kubeapi.Access{
		{Verb: "get", Resource: "nodes", Subresource: "pods", Name: node},
		{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: node},
	}
	tests := []struct {
		name, method, target string
		discovery            bool
		want                 []kubeapi.Access
	}{
		{"list of the node", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", false, selected("list", "", "spec.nodeName=node-1", "")},
		{"list of a namespace of the node", "GET", "/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DRunning,spec.nodeName%3D%3Dnode-1&labelSelector=app%3Dweb", false, selected("list", "default", "status.phase=Running,spec.nodeName==node-1", "app=web")},
		{"watch of the node", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=true", false, selected("watch", "", "spec.nodeName=node-1", "")},
		{"watch=1", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=1", false, selected("watch", "", "spec.nodeName=node-1", "")},
		{"watch=false", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=false", false, selected("list", "", "spec.nodeName=node-1", "")},
		{"spec.host, the old name", "GET", "/api/v1/pods?fieldSelector=spec.host%3Dnode-1", false, selected("list", "", "spec.host=node-1", "")},
		{"a bad label selector is still the node's", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&labelSelector=a+in+(", false, selected("list", "", "spec.nodeName=node-1", "a in (")},
		{"get of a pod held", "GET", "/api/v1/namespaces/default/pods/web-1", false, pods("get", "default", "web-1")},
		{"the kubelet's /pods", "GET", "/pods", false, kubelet},
		{"local discovery", "GET", "/api/v1", true, []kubeapi.Access{{Verb: "get", Path: "/api/v1"}}},
		{"version", "GET", "/version", true, []kubeapi.Access{{Verb: "get", Path: "/version"}}},

		{"another node", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2", false, nil},
		{"not this node", "GET", "/api/v1/pods?fieldSelector=spec.nodeName!%3Dnode-1", false, nil},
		{"no selector: the cluster's pods", "GET", "/api/v1/pods", false, nil},
		{"labels only", "GET", "/api/v1/pods?labelSelector=app%3Dweb", false, nil},
		{"a field selector that does not parse", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1,x", false, nil},
		{"get of a pod not held", "GET", "/api/v1/namespaces/default/pods/web-2", false, nil},
		{"the deprecated watch of one pod", "GET", "/api/v1/namespaces/default/pods/web-1?watch=true", false, nil},
		{"a subresource", "GET", "/api/v1/namespaces/default/pods/web-1/log", false, nil},
		{"a write", "POST", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1", false, nil},
		{"a delete", "DELETE", "/api/v1/namespaces/default/pods/web-1", false, nil},
		{"discovery not asked for", "GET", "/api", false, nil},
		{"another resource", "GET", "/api/v1/namespaces", false, nil},
		{"another group", "GET", "/apis/apps/v1/deployments", false, nil},
		{"the old watch path", "GET", "/api/v1/watch/pods?fieldSelector=spec.nodeName%3Dnode-1", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []kubeapi.Option
			if tt.discovery {
				opts = append(opts, kubeapi.WithDiscovery())
			}
			h := handler(st, opts...)
			got, ok := h.Local(httptest.NewRequest(tt.method, tt.target, nil))
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Local(%s %s) = %+v, %v; want %+v", tt.method, tt.target, got, ok, tt.want)
			}
		})
	}
}
