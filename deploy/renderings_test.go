package deploy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// rendering is a validated rendering, decoded.
type rendering struct {
	daemonSets  []appsv1.DaemonSet
	roles       []rbacv1.ClusterRole
	podMonitors []monitoringv1.PodMonitor
	kinds       []string
	// delegators counts the ClusterRoleBindings to system:auth-delegator,
	// localService the Services with internalTrafficPolicy: Local.
	delegators, localService int
}

// decodeRendering renders v, validates it on c and decodes it.
func decodeRendering(t *testing.T, c *cluster, v variant) rendering {
	t.Helper()
	out := c.render(t, v)
	objs, err := c.validate(t, out)
	if err != nil {
		t.Fatalf("%s does not validate:\n%v\n---\n%s", v.name, err, out)
	}
	var r rendering
	for _, o := range objs {
		r.kinds = append(r.kinds, o.kind)
		var dst any
		switch o.kind {
		case "DaemonSet":
			r.daemonSets = append(r.daemonSets, appsv1.DaemonSet{})
			dst = &r.daemonSets[len(r.daemonSets)-1]
		case "ClusterRole":
			r.roles = append(r.roles, rbacv1.ClusterRole{})
			dst = &r.roles[len(r.roles)-1]
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(o.raw, &b); err != nil {
				t.Fatalf("%s %s: %v", o.kind, o.name, err)
			}
			if b.RoleRef.Name == "system:auth-delegator" {
				r.delegators++
			}
			continue
		case "Service":
			var svc corev1.Service
			if err := yaml.UnmarshalStrict(o.raw, &svc); err != nil {
				t.Fatalf("%s %s: %v", o.kind, o.name, err)
			}
			if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
				r.localService++
			}
			continue
		case "PodMonitor":
			r.podMonitors = append(r.podMonitors, monitoringv1.PodMonitor{})
			dst = &r.podMonitors[len(r.podMonitors)-1]
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(o.raw, dst); err != nil {
			t.Fatalf("%s %s: %v", o.kind, o.name, err)
		}
	}
	if len(r.daemonSets) != 1 {
		t.Fatalf("%s: %d DaemonSets, want 1", v.name, len(r.daemonSets))
	}
	return r
}

func (r rendering) container() corev1.Container {
	return r.daemonSets[0].Spec.Template.Spec.Containers[0]
}

// allows reports whether a ClusterRole of r allows get on resource.
func (r rendering) allows(resource string) bool {
	for _, role := range r.roles {
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, "get") {
				return true
			}
		}
	}
	return false
}

// rulesOf returns the rules of the ClusterRole of r named name.
func (r rendering) rulesOf(name string) []rbacv1.PolicyRule {
	for _, role := range r.roles {
		if role.Name == name {
			return role.Rules
		}
	}
	return nil
}

// TestRenderings renders every variant of deploy/ with kubectl kustomize and
// has a real kube-apiserver judge each one (see cluster.validate), then
// checks what an operator relies on: probes that need a synced server,
// least-privilege RBAC, IPv6-safe arguments. make deploy-check runs it; it
// skips without kubetest.EnvBin.
func TestRenderings(t *testing.T) {
	c := startCluster(t)
	t.Run("variants", func(t *testing.T) { checkVariants(t, c) })
	t.Run("refused", func(t *testing.T) { checkRefused(t, c) })
	t.Run("podmonitor-strict", func(t *testing.T) { checkPodMonitorStrict(t, c) })
}

// checkVariants checks the renderings of every variant.
func checkVariants(t *testing.T, c *cluster) {
	const caFlag = "--kubelet-ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	tests := []struct {
		variant variant
		check   func(t *testing.T, r rendering)
	}{
		{
			variant: variant{name: "default", base: "."},
			check: func(t *testing.T, r rendering) {
				if r.allows("nodes/proxy") || !r.allows("nodes/pods") {
					t.Errorf("RBAC: want get nodes/pods and no nodes/proxy by default")
				}
				if !slices.Contains(r.container().Args, "--kubelet-insecure-skip-verify=true") {
					t.Errorf("args %q: want self-signed kubelet certificates accepted by default", r.container().Args)
				}
			},
		},
		{
			variant: variant{name: "kubelet-ca", base: ".", components: []string{"components/kubelet-ca"}},
			check: func(t *testing.T, r rendering) {
				args := r.container().Args
				if !slices.Contains(args, caFlag) || slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "insecure") }) {
					t.Errorf("args %q: want %s instead of --kubelet-insecure-skip-verify", args, caFlag)
				}
			},
		},
		{
			variant: variant{name: "nodes-proxy", base: ".", components: []string{"components/nodes-proxy"}},
			check: func(t *testing.T, r rendering) {
				if !r.allows("nodes/proxy") || !r.allows("nodes/pods") {
					t.Errorf("RBAC: want get nodes/pods and nodes/proxy")
				}
			},
		},
		{
			variant: variant{name: "prometheus", base: ".", components: []string{"components/prometheus"}},
			check: func(t *testing.T, r rendering) {
				if len(r.podMonitors) != 1 || !slices.Contains(r.kinds, "Service") {
					t.Fatalf("kinds %q: want a PodMonitor and a Service", r.kinds)
				}
				pm, ds := r.podMonitors[0], r.daemonSets[0]
				for k, v := range pm.Spec.Selector.MatchLabels {
					if ds.Spec.Template.Labels[k] != v {
						t.Errorf("PodMonitor selects %s=%s; the pods have %v", k, v, ds.Spec.Template.Labels)
					}
				}
				if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == "" ||
					!slices.ContainsFunc(r.container().Ports, func(p corev1.ContainerPort) bool { return p.Name == pm.Spec.PodMetricsEndpoints[0].Port }) {
					t.Errorf("PodMonitor endpoints %+v: want the container's port by name", pm.Spec.PodMetricsEndpoints)
				}
			},
		},
		{
			variant: variant{name: "nri", base: ".", components: []string{"components/nri"}},
			check: func(t *testing.T, r rendering) {
				if !slices.Contains(r.container().Args, "--nri-socket=/var/run/nri/nri.sock") {
					t.Errorf("args %q: want --nri-socket=/var/run/nri/nri.sock", r.container().Args)
				}
				if !slices.ContainsFunc(r.container().VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/nri" }) ||
					!slices.ContainsFunc(r.daemonSets[0].Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
						return v.HostPath != nil && v.HostPath.Path == "/var/run/nri"
					}) {
					t.Errorf("want the host's /var/run/nri mounted at /var/run/nri")
				}
			},
		},
		{
			variant: variant{name: "workloads", base: "apiserver", components: []string{"components/workloads"}},
			check: func(t *testing.T, r rendering) {
				if !slices.Contains(r.container().Args, "--workloads=apiserver") {
					t.Errorf("args %q: want --workloads=apiserver", r.container().Args)
				}
				rules := r.rulesOf("podsapi-workloads")
				want := []rbacv1.PolicyRule{
					{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
					{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
				}
				if !reflect.DeepEqual(rules, want) {
					t.Errorf("ClusterRole podsapi-workloads rules %+v, want get replicasets and jobs alone", rules)
				}
			},
		},
		{
			variant: variant{name: "all-components", base: ".",
				components: []string{"components/kubelet-ca", "components/nodes-proxy", "components/prometheus", "components/nri"}},
			check: func(t *testing.T, r rendering) {
				if !slices.Contains(r.container().Args, caFlag) || !r.allows("nodes/proxy") || len(r.podMonitors) != 1 ||
					!slices.Contains(r.container().Args, "--nri-socket=/var/run/nri/nri.sock") {
					t.Errorf("want the four components applied together")
				}
			},
		},
		{
			variant: variant{name: "kube-api", base: ".", components: []string{"components/kube-api"}},
			check:   checkKubeAPI,
		},
		{
			variant: variant{name: "kube-api-kinds", base: ".", components: []string{"components/kube-api", "components/kube-api-kinds"}},
			check: func(t *testing.T, r rendering) {
				checkKubeAPI(t, r)
				rules := r.rulesOf("podsapi-kube-api-kinds")
				want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}}}
				if !reflect.DeepEqual(rules, want) {
					t.Errorf("ClusterRole podsapi-kube-api-kinds rules %+v, want get, list and watch of namespaces and nodes alone", rules)
				}
			},
		},
		{
			variant: variant{name: "node-view", base: ".",
				components: []string{"components/kube-api", "components/kube-api-kinds", "components/workloads", "components/node-view"}},
			check: func(t *testing.T, r rendering) {
				checkKubeAPI(t, r)
				if !slices.Contains(r.container().Args, "--workloads=apiserver") {
					t.Errorf("args %q: want --workloads=apiserver", r.container().Args)
				}
				want := []rbacv1.PolicyRule{
					{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get"}},
					{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get"}},
					{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
				}
				if rules := r.rulesOf("podsapi-node-view"); !reflect.DeepEqual(rules, want) {
					t.Errorf("ClusterRole podsapi-node-view rules %+v, want get of the slice's kinds alone", rules)
				}
			},
		},
		{
			variant: variant{name: "apiserver-kube-api", base: "apiserver", components: []string{"components/kube-api"}},
			check: func(t *testing.T, r rendering) {
				checkKubeAPI(t, r)
				if !slices.Contains(r.container().Args, "--source=apiserver") {
					t.Errorf("args %q: want --source=apiserver", r.container().Args)
				}
			},
		},
		{
			variant: variant{name: "apiserver", base: "apiserver"},
			check: func(t *testing.T, r rendering) {
				if r.allows("nodes/proxy") || r.allows("nodes/pods") || !r.allows("pods") {
					t.Errorf("RBAC: want get pods and nothing of the kubelet")
				}
				if !slices.Contains(r.container().Args, "--source=apiserver") {
					t.Errorf("args %q: want --source=apiserver", r.container().Args)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.variant.name, func(t *testing.T) {
			r := decodeRendering(t, c, tt.variant)
			c := r.container()
			// What every variant keeps: probes that need a synced server,
			// the image of the kustomization, no address concatenation.
			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.Exec == nil || !slices.Contains(p.Exec.Command, "--serving") {
					t.Errorf("%s probe %+v: want an exec of podsapi-server probe --serving", name, p)
				}
			}
			if !strings.HasPrefix(c.Image, "ghcr.io/podsapi/podsapi:") {
				t.Errorf("image %q: want ghcr.io/podsapi/podsapi with the tag of base/kustomization.yaml", c.Image)
			}
			for _, a := range c.Args {
				if strings.Contains(a, "IP):") {
					t.Errorf("argument %q joins an IP and a port by hand: it breaks on IPv6", a)
				}
			}
			tt.check(t, r)
		})
	}
}

// checkKubeAPI checks the component kube-api: the flags of the Kubernetes
// API with the Secret's certificate mounted where they say, its port, the
// Service local to each node, and the auth-delegator binding.
func checkKubeAPI(t *testing.T, r rendering) {
	t.Helper()
	c := r.container()
	for _, want := range []string{"--kube-api-address=:10266", "--kube-api-tls-cert-file=/etc/podsapi/kube-api-tls/tls.crt",
		"--kube-api-tls-private-key-file=/etc/podsapi/kube-api-tls/tls.key", "--kube-api-socket=/var/lib/kubelet/pods-api/kube-api.sock"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q: want %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "kube-api" && p.ContainerPort == 10266 }) {
		t.Errorf("ports %+v: want kube-api 10266", c.Ports)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/podsapi/kube-api-tls" }) {
		t.Errorf("volume mounts %+v: want the serving certificate at /etc/podsapi/kube-api-tls", c.VolumeMounts)
	}
	if !slices.ContainsFunc(r.daemonSets[0].Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "podsapi-kube-api-tls"
	}) {
		t.Errorf("want the Secret podsapi-kube-api-tls as a volume")
	}
	if !slices.Contains(r.kinds, "Service") || r.delegators == 0 {
		t.Errorf("kinds %q, %d bindings to system:auth-delegator: want the Service and one binding", r.kinds, r.delegators)
	}
	if r.localService == 0 {
		t.Errorf("want the Service with internalTrafficPolicy: Local")
	}
}

// checkRefused shows that validation is not a formality: the default
// DaemonSet spoiled in ways the API server refuses fails it.
func checkRefused(t *testing.T, c *cluster) {
	out := c.render(t, variant{name: "spoiled", base: "."})
	if _, err := c.validate(t, out); err != nil {
		t.Fatalf("the default rendering does not validate: %v", err)
	}
	tests := []struct {
		name, old, new string
	}{
		{name: "unknown field", old: "  updateStrategy:", new: "  replicas: 3\n  updateStrategy:"},
		{name: "wrong type", old: "containerPort: 10265", new: "containerPort: metrics"},
		{name: "missing required field", old: "  selector:\n    matchLabels:\n      app.kubernetes.io/name: podsapi\n  template:", new: "  template:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spoiled := strings.Replace(string(out), tt.old, tt.new, 1)
			if spoiled == string(out) {
				t.Fatalf("the rendering has no %q", tt.old)
			}
			if _, err := c.validate(t, []byte(spoiled)); err == nil || !strings.Contains(err.Error(), "DaemonSet") {
				t.Errorf("the rendering with %q: %v, want the DaemonSet refused", tt.new, err)
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// checkPodMonitorStrict shows that the PodMonitor is checked too: a field
// its Go type does not have is refused.
func checkPodMonitorStrict(t *testing.T, c *cluster) {
	out := c.render(t, variant{name: "spoiled-prometheus", base: ".", components: []string{"components/prometheus"}})
	spoiled := strings.Replace(string(out), "podMetricsEndpoints:", "podMetricEndpoints:", 1)
	if spoiled == string(out) {
		t.Fatal("the rendering has no podMetricsEndpoints")
	}
	if _, err := c.validate(t, []byte(spoiled)); err == nil || !strings.Contains(err.Error(), "PodMonitor") {
		t.Errorf("a PodMonitor with an unknown field: %v, want it refused", err)
	}
}
