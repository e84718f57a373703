package deploy_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// defaultSocket is the socket path every manifest must agree on.
const defaultSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// manifests holds the decoded objects of the YAML manifests of deploy/.
type manifests struct {
	namespaces      []*corev1.Namespace
	serviceAccounts []*corev1.ServiceAccount
	roles           []*rbacv1.ClusterRole
	bindings        []*rbacv1.ClusterRoleBinding
	daemonSets      []*appsv1.DaemonSet
	pods            []*corev1.Pod
}

// decodeFile decodes every document of a YAML file strictly: unknown and
// duplicate fields and unknown kinds are errors.
func decodeFile(t *testing.T, path string, m *manifests) {
	t.Helper()
	scheme := kruntime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(rbacv1.AddToScheme(scheme))
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := documents(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for i, doc := range docs {
		obj, _, err := s.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o)
		case *corev1.ServiceAccount:
			m.serviceAccounts = append(m.serviceAccounts, o)
		case *rbacv1.ClusterRole:
			m.roles = append(m.roles, o)
		case *rbacv1.ClusterRoleBinding:
			m.bindings = append(m.bindings, o)
		case *appsv1.DaemonSet:
			m.daemonSets = append(m.daemonSets, o)
		case *corev1.Pod:
			m.pods = append(m.pods, o)
		default:
			t.Fatalf("%s: document %d: unexpected %T", path, i, obj)
		}
	}
}

// documents splits a YAML stream into its documents, leaving out those
// that hold only comments.
func documents(data []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// load decodes base/daemonset.yaml and example-agent.yaml.
func load(t *testing.T) (server, agent *manifests) {
	t.Helper()
	server, agent = new(manifests), new(manifests)
	decodeFile(t, "base/daemonset.yaml", server)
	decodeFile(t, "example-agent.yaml", agent)
	if len(server.daemonSets) != 1 || len(server.namespaces) != 1 || len(server.serviceAccounts) != 1 ||
		len(server.roles) != 1 || len(server.bindings) != 1 || len(server.pods) != 0 {
		t.Fatalf("daemonset.yaml: want one Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding and DaemonSet")
	}
	if len(agent.pods) != 1 || len(agent.daemonSets) != 0 {
		t.Fatalf("example-agent.yaml: want one Pod")
	}
	return server, agent
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// flagNames returns the names of the --flags of args.
func flagNames(args []string) []string {
	var names []string
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			names = append(names, name)
		}
	}
	return names
}

// hostPathMount returns the host path and the mount path of the hostPath
// volume of spec mounted in container c.
func hostPathMount(t *testing.T, spec corev1.PodSpec, c corev1.Container) (hostPath, mountPath string, readOnly bool) {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volume %s: hostPath type %v, want DirectoryOrCreate (the directory, not the socket)", v.Name, v.HostPath.Type)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				return v.HostPath.Path, m.MountPath, m.ReadOnly
			}
		}
	}
	t.Fatalf("container %s mounts no hostPath volume", c.Name)
	return "", "", false
}

func TestSocketPathsAgree(t *testing.T) {
	server, agent := load(t)
	ds := server.daemonSets[0]
	c := ds.Spec.Template.Spec.Containers[0]
	sock, ok := flagValue(c.Args, "socket")
	if !ok || sock != defaultSocket {
		t.Fatalf("server --socket = %q, want %q", sock, defaultSocket)
	}
	hostPath, mountPath, _ := hostPathMount(t, ds.Spec.Template.Spec, c)
	if dir := filepath.Dir(sock); hostPath != dir || mountPath != dir {
		t.Errorf("server: hostPath %q mounted at %q, want both %q (the socket's directory)", hostPath, mountPath, dir)
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if probe == nil || probe.Exec == nil {
			t.Errorf("server %s probe: want an exec probe", name)
			continue
		}
		// --serving: a server that answers but has not synced fails it
		// (TestProbesFailUntilSynced runs it).
		cmd := probe.Exec.Command
		if got, _ := flagValue(cmd, "socket"); len(cmd) < 3 || cmd[0] != c.Command[0] || cmd[1] != "probe" ||
			!slices.Contains(cmd, "--serving") || got != sock {
			t.Errorf("server %s probe = %q, want %s probe --serving --socket=%s", name, cmd, c.Command[0], sock)
		}
	}

	pod := agent.pods[0]
	ac := pod.Spec.Containers[0]
	aHost, aMount, readOnly := hostPathMount(t, pod.Spec, ac)
	if aHost != hostPath {
		t.Errorf("agent mounts host %q, want the server's %q", aHost, hostPath)
	}
	aSock, ok := flagValue(ac.Args, "socket")
	if !ok || aSock != filepath.Join(aMount, filepath.Base(sock)) {
		t.Errorf("agent --socket = %q, want %q", aSock, filepath.Join(aMount, filepath.Base(sock)))
	}
	if !readOnly {
		t.Errorf("agent mount is writable, want read-only")
	}
	if len(ac.Args) == 0 || ac.Args[0] != "watch" || ac.Command[0] != "/podsctl" {
		t.Errorf("agent runs %q %q, want /podsctl watch", ac.Command, ac.Args)
	}
}

func TestRBAC(t *testing.T) {
	server, _ := load(t)
	ns, sa, role, binding := server.namespaces[0], server.serviceAccounts[0], server.roles[0], server.bindings[0]
	spec := server.daemonSets[0].Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name || sa.Namespace != ns.Name || server.daemonSets[0].Namespace != ns.Name {
		t.Errorf("DaemonSet %s/%s runs as %q; ServiceAccount %s/%s", server.daemonSets[0].Namespace, server.daemonSets[0].Name,
			spec.ServiceAccountName, sa.Namespace, sa.Name)
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name ||
		binding.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("ClusterRoleBinding refers to %+v, want ClusterRole %s", binding.RoleRef, role.Name)
	}
	if !slices.Contains(binding.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}) {
		t.Errorf("ClusterRoleBinding subjects %+v do not include the ServiceAccount", binding.Subjects)
	}
	// Least privilege: nodes/pods (fine-grained kubelet authorization,
	// GA in Kubernetes 1.36) alone; nodes/proxy, which allows exec into
	// every pod of the node, only in the component for older kubelets.
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/pods"}, Verbs: []string{"get"}}}
	if !equalRules(role.Rules, want) {
		t.Errorf("ClusterRole %s rules = %+v, want get nodes/pods alone", role.Name, role.Rules)
	}

	proxy := new(manifests)
	decodeFile(t, "components/nodes-proxy/clusterrole.yaml", proxy)
	if len(proxy.roles) != 1 || len(proxy.bindings) != 1 {
		t.Fatalf("components/nodes-proxy/clusterrole.yaml: want a ClusterRole and a ClusterRoleBinding")
	}
	want = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}}
	if !equalRules(proxy.roles[0].Rules, want) {
		t.Errorf("components/nodes-proxy: ClusterRole rules = %+v, want get nodes/proxy alone", proxy.roles[0].Rules)
	}
	if b := proxy.bindings[0]; b.RoleRef.Name != proxy.roles[0].Name || b.RoleRef.Kind != "ClusterRole" ||
		!slices.Equal(b.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}) {
		t.Errorf("components/nodes-proxy: binding %+v, want ClusterRole %s bound to the ServiceAccount %s/%s", b, proxy.roles[0].Name, sa.Namespace, sa.Name)
	}
	if proxy.roles[0].Name == role.Name {
		t.Errorf("components/nodes-proxy: ClusterRole %s replaces the default one, want one of its own", role.Name)
	}
}

// equalRules reports whether two lists of rules are the same, with no
// resource names or non-resource URLs.
func equalRules(got, want []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(got, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
			len(a.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
	})
}

func TestServerPodSpec(t *testing.T) {
	server, agent := load(t)
	spec := server.daemonSets[0].Spec.Template.Spec
	c := spec.Containers[0]
	if got := deployedImage(t); got != agent.pods[0].Spec.Containers[0].Image || !strings.HasPrefix(got, "ghcr.io/podsapi/podsapi:") {
		t.Errorf("images: server %q, agent %q, want the same ghcr.io/podsapi/podsapi image", got, agent.pods[0].Spec.Containers[0].Image)
	}
	if strings.Contains(c.Image, ":") {
		t.Errorf("base/daemonset.yaml names image %q: want no tag there, the images entry of base/kustomization.yaml sets it", c.Image)
	}
	if tpl := server.daemonSets[0].Spec.Template.Annotations; tpl["prometheus.io/scrape"] != "true" ||
		tpl["prometheus.io/port"] != "10265" || tpl["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v, want prometheus.io/scrape, port 10265 and path /metrics", tpl)
	}
	if m, _ := flagValue(c.Args, "metrics-address"); m != ":10265" || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 10265 {
		t.Errorf("--metrics-address = %q, ports %+v, want :10265 (every address of the pod, IPv4 or IPv6) and its port", m, c.Ports)
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName = %q, want system-node-critical", spec.PriorityClassName)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		t.Errorf("tolerations %+v do not tolerate every taint", spec.Tolerations)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("securityContext = %+v, want root, a read-only root file system, no privilege escalation, all capabilities dropped", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	if src, _ := flagValue(c.Args, "source"); src != "kubelet-http" {
		t.Errorf("--source = %q, want kubelet-http", src)
	}
	// No URL built by concatenation ("https://$(NODE_IP):10250" breaks on
	// IPv6): the server brackets the host it is given.
	if u, ok := flagValue(c.Args, "kubelet-url"); ok {
		t.Errorf("--kubelet-url = %q, want the default with --kubelet-host", u)
	}
	if h, _ := flagValue(c.Args, "kubelet-host"); h != "$(NODE_IP)" {
		t.Errorf("--kubelet-host = %q, want $(NODE_IP)", h)
	}
	// Self-signed kubelet certificates (kind, kubeadm) by default; the
	// kubelet-ca component replaces the argument (make deploy-check renders it).
	if v, _ := flagValue(c.Args, "kubelet-insecure-skip-verify"); v != "true" {
		t.Errorf("--kubelet-insecure-skip-verify = %q, want true by default", v)
	}
	if n, _ := flagValue(c.Args, "node-name"); n != "$(NODE_NAME)" {
		t.Errorf("--node-name = %q, want $(NODE_NAME)", n)
	}
	// Every $(VAR) of the arguments comes from the downward API.
	fieldPaths := map[string]string{"NODE_NAME": "spec.nodeName", "NODE_IP": "status.hostIP"}
	env := make(map[string]string)
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(strings.Join(c.Args, " "), -1) {
		if env[m[1]] == "" || env[m[1]] != fieldPaths[m[1]] {
			t.Errorf("argument variable $(%s) comes from %q, want the downward API's %q", m[1], env[m[1]], fieldPaths[m[1]])
		}
	}
}

func TestKustomization(t *testing.T) {
	var k struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Resources  []string         `json:"resources"`
		Images     []kustomizeImage `json:"images"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || !slices.Equal(k.Resources, []string{"base"}) {
		t.Errorf("kustomization.yaml is a %s %s of %q, want a Kustomization of base", k.APIVersion, k.Kind, k.Resources)
	}
	k.Resources = nil
	if data, err = os.ReadFile("base/kustomization.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("base/kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("base/kustomization.yaml is a %s %s", k.APIVersion, k.Kind)
	}
	if !slices.Contains(k.Resources, "daemonset.yaml") {
		t.Errorf("base/kustomization.yaml resources %q do not include daemonset.yaml", k.Resources)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("base", r)); err != nil {
			t.Errorf("base/kustomization.yaml resource: %v", err)
		}
	}
	server, _ := load(t)
	image := server.daemonSets[0].Spec.Template.Spec.Containers[0].Image
	if len(k.Images) != 1 || k.Images[0].Name != image || k.Images[0].NewName == "" || k.Images[0].NewTag == "" {
		t.Errorf("base/kustomization.yaml images %+v, want one entry for the DaemonSet's %s with newName and newTag", k.Images, image)
	}
}

// kustomizeImage is an entry of the images of a kustomization.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
}

// deployedImage returns the image reference the DaemonSet runs once
// kustomize has applied the images entry of base/kustomization.yaml.
func deployedImage(t *testing.T) string {
	t.Helper()
	var k struct {
		Images []kustomizeImage `json:"images"`
	}
	data, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("base/kustomization.yaml: %v", err)
	}
	server, _ := load(t)
	image := server.daemonSets[0].Spec.Template.Spec.Containers[0].Image
	for _, img := range k.Images {
		if img.Name == image {
			return cmp.Or(img.NewName, img.Name) + ":" + img.NewTag
		}
	}
	t.Fatalf("base/kustomization.yaml sets no image for %s", image)
	return ""
}

// unitExecStart returns the arguments of ExecStart of podsapi.service with
// $PODSAPI_SOURCE_ARGS expanded from its Environment= default, and the
// unit's directives.
func unitExecStart(t *testing.T) (args []string, directives map[string][]string) {
	t.Helper()
	data, err := os.ReadFile("podsapi.service")
	if err != nil {
		t.Fatal(err)
	}
	directives = make(map[string][]string)
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("podsapi.service: bad line %q", line)
		}
		directives[k] = append(directives[k], v)
	}
	env := map[string]string{}
	for _, e := range directives["Environment"] {
		k, v, _ := strings.Cut(strings.Trim(e, `"`), "=")
		env[k] = v
	}
	exec := directives["ExecStart"]
	if len(exec) != 1 {
		t.Fatalf("podsapi.service: %d ExecStart lines, want 1", len(exec))
	}
	for _, f := range strings.Fields(exec[0]) {
		if name, ok := strings.CutPrefix(f, "$"); ok {
			args = append(args, strings.Fields(env[name])...)
			continue
		}
		args = append(args, f)
	}
	return args, directives
}

func TestSystemdUnit(t *testing.T) {
	args, d := unitExecStart(t)
	if args[0] != "/usr/local/bin/podsapi-server" {
		t.Errorf("ExecStart runs %q", args[0])
	}
	sock, _ := flagValue(args, "socket")
	if sock != defaultSocket {
		t.Errorf("--socket = %q, want %q", sock, defaultSocket)
	}
	tests := []struct {
		directive string
		want      string
	}{
		{directive: "StateDirectory", want: "kubelet/pods-api"},
		{directive: "ProtectSystem", want: "strict"},
		{directive: "NoNewPrivileges", want: "yes"},
		{directive: "RuntimeDirectory", want: "podsapi"},
		{directive: "Restart", want: "always"},
		{directive: "WantedBy", want: "multi-user.target"},
	}
	for _, tt := range tests {
		t.Run(tt.directive, func(t *testing.T) {
			if !slices.Contains(d[tt.directive], tt.want) {
				t.Errorf("%s = %q, want %q", tt.directive, d[tt.directive], tt.want)
			}
		})
	}
}

func TestFlagsExistInServer(t *testing.T) {
	known := serverFlags(t)
	server, _ := load(t)
	c := server.daemonSets[0].Spec.Template.Spec.Containers[0]
	unitArgs, _ := unitExecStart(t)
	uses := map[string][]string{
		"base/daemonset.yaml": c.Args,
		"podsapi.service":     unitArgs[1:],
	}
	for file, args := range uses {
		for _, name := range flagNames(args) {
			switch {
			case known[name]:
			default:
				t.Errorf("%s: podsapi-server has no flag --%s", file, name)
			}
		}
	}
}

var (
	helpOnce  sync.Once
	helpFlags map[string]bool
	helpErr   string
)

// serverFlags returns the flags of `podsapi-server --help`, built from
// ../cmd/podsapi-server.
func serverFlags(t *testing.T) map[string]bool {
	t.Helper()
	helpOnce.Do(func() {
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, _ := exec.CommandContext(ctx, goTool, "run", "../cmd/podsapi-server", "--help").CombinedOutput()
		if !bytes.Contains(out, []byte("Usage:")) {
			helpErr = "go run ../cmd/podsapi-server --help printed no usage:\n" + string(out)
			return
		}
		helpFlags = make(map[string]bool)
		for _, m := range regexp.MustCompile(`(?m)^\s+--?([a-z0-9][a-z0-9-]*)`).FindAllSubmatch(out, -1) {
			helpFlags[string(m[1])] = true
		}
	})
	if helpErr != "" {
		t.Fatal(helpErr)
	}
	return helpFlags
}
