package kubeapi

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Access is what a request answered locally needs of its caller's rights, in
// the terms of a SubjectAccessReview's resource attributes.
type Access struct {
	Verb      string // "get", "list" or "watch"
	Namespace string // "" for every namespace
	// Group is the resource's API group: "" for core (pods, namespaces,
	// nodes), "apps" or "batch" for the owner kinds (WithResource). Every
	// resource served is of version v1.
	Group       string
	Resource    string // "pods", "namespaces", "nodes", "replicasets", ... (the kubelet's /pods: nodes/pods, nodes/proxy)
	Subresource string // "", or "pods" / "proxy" for nodes
	Name        string // the object's name; the node's name for nodes/...
	// FieldSelector and LabelSelector are the selectors of a list or watch,
	// as the request wrote them (the raw query parameters), for a
	// SubjectAccessReview's fieldSelector and labelSelector attributes
	// (rawSelector): the API server's authorizers see a request's selectors
	// (KEP-4601, AuthorizeWithSelectors), so that a caller allowed only the
	// pods of its node is allowed here as there. Empty for other requests.
	FieldSelector string
	LabelSelector string
	// Path is the non-resource URL of a discovery request ("/api",
	// "/api/v1", "/apis", "/version"), with Verb "get" and the resource
	// fields empty: a SubjectAccessReview's non-resource attributes. It is
	// empty for every request about pods.
	Path string
}

// The core resources the handler reads specially: the node's pods, the
// node.
var (
	podsGR  = schema.GroupResource{Resource: "pods"}
	nodesGR = schema.GroupResource{Resource: "nodes"}
)

// kind is what a request asks of the handler.
type kind int

const (
	kindNone        kind = iota // not the handler's
	kindList                    // a list or watch of a resource (watch=true or not)
	kindGet                     // a get of one object
	kindKubeletPods             // the kubelet's GET /pods
	kindDiscovery               // /api, /api/v1, /apis, /version
)

// route is a request as the handler reads its path.
type route struct {
	kind kind
	// group and resource are the resource of kindList and kindGet: "" and
	// "pods", "namespaces" or "nodes"; "apps" or "batch" and an owner kind
	// ("replicasets").
	group, resource string
	namespace       string // "" for every namespace, and for kinds that have none
	name            string // the object of kindGet
	path            string // the path of kindDiscovery
}

// groupResource is the route's group and resource.
func (rt route) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: rt.group, Resource: rt.resource}
}

// routeOf returns what the path of r asks for, whatever its query.
func routeOf(r *http.Request) route {
	if r.Method != http.MethodGet {
		return route{}
	}
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/apis/"); ok {
		return groupRouteOf(rest)
	}
	switch p {
	case "/pods", "/pods/":
		return route{kind: kindKubeletPods}
	case "/api", "/api/", "/api/v1", "/api/v1/", "/apis", "/apis/", "/version", "/version/":
		return route{kind: kindDiscovery, path: strings.TrimSuffix(p, "/")}
	case "/api/v1/pods":
		return route{kind: kindList, resource: "pods"}
	case "/api/v1/namespaces":
		return route{kind: kindList, resource: "namespaces"}
	case "/api/v1/nodes":
		return route{kind: kindList, resource: "nodes"}
	}
	if name, ok := strings.CutPrefix(p, "/api/v1/nodes/"); ok {
		if name == "" || strings.Contains(name, "/") {
			return route{}
		}
		return route{kind: kindGet, resource: "nodes", name: name}
	}
	rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/")
	if !ok {
		return route{}
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return route{kind: kindGet, resource: "namespaces", name: parts[0]}
	case len(parts) == 2 && parts[0] != "" && parts[1] == "pods":
		return route{kind: kindList, resource: "pods", namespace: parts[0]}
	case len(parts) == 3 && parts[0] != "" && parts[1] == "pods" && parts[2] != "":
		return route{kind: kindGet, resource: "pods", namespace: parts[0], name: parts[2]}
	}
	return route{}
}

// groupRouteOf returns what a path /apis/<rest> asks for: a list of a
// namespaced resource of a group's v1 (/apis/<group>/v1/<resource>, or in
// a namespace /apis/<group>/v1/namespaces/<ns>/<resource>), or a get of one
// object (/apis/<group>/v1/namespaces/<ns>/<resource>/<name>). Whether the
// handler serves the resource is the caller's to check.
func groupRouteOf(rest string) route {
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || parts[0] == "" || parts[1] != "v1" {
		return route{}
	}
	group, parts := parts[0], parts[2:]
	for _, part := range parts {
		if part == "" {
			return route{}
		}
	}
	switch {
	case len(parts) == 1:
		return route{kind: kindList, group: group, resource: parts[0]}
	case len(parts) == 3 && parts[0] == "namespaces":
		return route{kind: kindList, group: group, resource: parts[2], namespace: parts[1]}
	case len(parts) == 4 && parts[0] == "namespaces":
		return route{kind: kindGet, group: group, resource: parts[2], namespace: parts[1], name: parts[3]}
	}
	return route{}
}

// Local reports whether h answers r itself (pods pinned to this node, the
// kubelet's /pods, local discovery when asked), and the accesses it needs:
// the request is allowed when any one of them is allowed, tried in order
// (the kubelet's /pods: nodes/pods, then nodes/proxy).
//
// A list or watch of pods is local when its fieldSelector parses and
// requires spec.nodeName (or its old name spec.host) to equal the node; the
// selector's other terms, the label selector and the other parameters are
// checked by ServeHTTP, which answers their errors as the API server does. A
// get of a pod is local when the store holds a pod of that namespace and
// name; a name the store does not hold is not local (the pod may be one of
// another node, which the API server answers), though ServeHTTP answers it
// with 404 NotFound when called anyway (a door with no upstream may). A get
// with watch=true (the API server's deprecated watch of one object) is not
// local. Only GET is ever local.
//
// With WithNamespaces, once its store has synced, a list or watch of
// namespaces and a get of a namespace it holds are local; with WithNode, a
// get of the node and a list or watch whose fieldSelector requires
// metadata.name=<node>; with WithResource, once its store has synced, a
// list or watch of the resource and a get of an object its store holds.
// Before their store syncs, and for an object it does not hold (yet), they
// are the API server's.
//
// With WithNodeView, a list or watch of pods or nodes is local without the
// field selector that pins it to the node, a get of an object the
// store does not hold is local too (ServeHTTP answers it 404 NotFound),
// and a request of a kind whose store has not synced is local too
// (ServeHTTP answers it 503 with Retry-After, as pods): the API server's
// answer would be the cluster's, not the node's slice.
func (h *Handler) Local(r *http.Request) ([]Access, bool) {
	rt := routeOf(r)
	if rt.resource != "" && rt.groupResource() != podsGR {
		return h.localKind(r, rt)
	}
	switch rt.kind {
	case kindKubeletPods:
		return []Access{
			{Verb: "get", Resource: "nodes", Subresource: "pods", Name: h.node},
			{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: h.node},
		}, true
	case kindDiscovery:
		if !h.discovery {
			return nil, false
		}
		return []Access{{Verb: "get", Path: rt.path}}, true
	case kindGet:
		if IsTrue(r.URL.Query(), "watch") {
			return nil, false // the API server's deprecated watch of one object
		}
		if _, ok := h.resources[podsGR].find(rt.namespace, rt.name); !ok && !h.nodeView {
			return nil, false
		}
		return []Access{{Verb: "get", Namespace: rt.namespace, Resource: "pods", Name: rt.name}}, true
	case kindList:
		q := r.URL.Query()
		if !h.nodeView && !h.pinned(q.Get("fieldSelector")) {
			return nil, false
		}
		return []Access{listAccess(r, rt)}, true
	}
	return nil, false
}

// localKind is Local for a request of a kind other than pods.
func (h *Handler) localKind(r *http.Request, rt route) ([]Access, bool) {
	res := h.resources[rt.groupResource()]
	if res == nil || (!res.reader.Synced() && !h.nodeView) {
		return nil, false
	}
	switch rt.kind {
	case kindGet:
		if IsTrue(r.URL.Query(), "watch") {
			return nil, false
		}
		if _, ok := res.find(rt.namespace, rt.name); !ok && !h.nodeView {
			return nil, false
		}
		a := Access{Verb: "get", Namespace: rt.namespace, Group: rt.group, Resource: rt.resource, Name: rt.name}
		if rt.groupResource() == (schema.GroupResource{Resource: "namespaces"}) {
			// The API server reads /api/v1/namespaces/<name> as a request
			// in the namespace <name> (its RequestInfo), and so authorizes
			// it.
			a.Namespace = rt.name
		}
		return []Access{a}, true
	case kindList:
		if rt.groupResource() == nodesGR && !h.nodeView && !requires(r.URL.Query().Get("fieldSelector"), h.node, "metadata.name") {
			return nil, false
		}
		return []Access{listAccess(r, rt)}, true
	}
	return nil, false
}

// listAccess is the access a list or watch needs: its verb, the resource
// and namespace, the name its field selector requires, its selectors.
func listAccess(r *http.Request, rt route) Access {
	q := r.URL.Query()
	verb := "list"
	if IsTrue(q, "watch") {
		verb = "watch"
	}
	return Access{
		Verb: verb, Namespace: rt.namespace, Group: rt.group, Resource: rt.resource, Name: selectedName(r),
		FieldSelector: q.Get("fieldSelector"), LabelSelector: q.Get("labelSelector"),
	}
}

// selectedName returns the name that the fieldSelector of the list or watch
// r requires (metadata.name=X), as the API server reads it (k8s.io/apiserver
// request.RequestInfoFactory): its authorizers see such a request as one for
// the object X, so that a caller allowed only X by name (RBAC's
// resourceNames) may list and watch it. It returns "" when the list options
// do not parse, the selector requires no name, or the name is not one a
// path may hold.
func selectedName(r *http.Request) string {
	var opts metainternalversion.ListOptions
	if metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts) != nil || opts.FieldSelector == nil {
		return ""
	}
	name, ok := opts.FieldSelector.RequiresExactMatch("metadata.name")
	if !ok || len(content.IsPathSegmentName(name)) != 0 {
		return ""
	}
	return name
}

// pinned reports whether the field selector text parses and requires the
// pods of this node.
func (h *Handler) pinned(text string) bool {
	return requires(text, h.node, "spec.nodeName", "spec.host")
}

// requires reports whether the field selector text parses and requires
// one of the fields to equal value.
func requires(text, value string, fieldNames ...string) bool {
	if text == "" {
		return false
	}
	sel, err := fields.ParseSelector(text)
	if err != nil {
		return false
	}
	for _, f := range fieldNames {
		if v, ok := sel.RequiresExactMatch(f); ok && v == value {
			return true
		}
	}
	return false
}

// IsTrue reports whether the boolean query parameter key is set, as the API
// server's parameter codec reads it (runtime.Convert_Slice_string_To_bool):
// present, and neither "0" nor "false".
func IsTrue(q url.Values, key string) bool {
	v, ok := q[key]
	return ok && len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// Pods reports whether r reads pods through the paths the handler serves,
// local or not (a get of a pod the store does not hold, a list or watch not
// pinned to the node), and the accesses it needs, as Local does for the
// requests it claims. A door with no API server to pass such requests to
// has the handler answer them, once allowed: 404 NotFound for the pod, 503
// naming the field selector to add for the list.
func (h *Handler) Pods(r *http.Request) ([]Access, bool) {
	rt := routeOf(r)
	if rt.groupResource() != podsGR {
		return nil, false
	}
	switch rt.kind {
	case kindGet:
		if IsTrue(r.URL.Query(), "watch") {
			return nil, false
		}
		return []Access{{Verb: "get", Namespace: rt.namespace, Resource: "pods", Name: rt.name}}, true
	case kindList:
		return []Access{listAccess(r, rt)}, true
	}
	return nil, false
}
