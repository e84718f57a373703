package fieldmask_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// richPod returns a realistic pod with several containers, init containers,
// statuses in every state, conditions, labels, annotations, owner references,
// resources, probes, env and pod IPs.
func richPod() *corev1.Pod {
	created := metav1.NewTime(time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC))
	started := metav1.NewTime(created.Add(5 * time.Second))
	finished := metav1.NewTime(created.Add(42 * time.Second))
	ctrl := true
	grace := int64(30)
	user := int64(1000)
	sizeLimit := resource.MustParse("64Mi")

	resources := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(mem),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse(mem),
			},
		}
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromInt32(int32(port)), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 3, PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1,
		}
	}
	container := func(name, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:    name,
			Image:   image,
			Command: []string{"/bin/" + name},
			Args:    []string{"--port", fmt.Sprint(port), "--log-level=info"},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
				{Name: "MODE", Value: "production"},
			},
			Resources:      resources("250m", "256Mi"),
			LivenessProbe:  probe("/healthz", int(port)),
			ReadinessProbe: probe("/readyz", int(port)),
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/" + name, ReadOnly: true},
				{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			SecurityContext:          &corev1.SecurityContext{RunAsUser: &user, RunAsNonRoot: &ctrl},
		}
	}
	status := func(name, image string, ready bool, state corev1.ContainerState, restarts int32) corev1.ContainerStatus {
		started := ready
		return corev1.ContainerStatus{
			Name:         name,
			Image:        image,
			ImageID:      image + "@sha256:4f5a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
			ContainerID:  "containerd://" + name + "0123456789abcdef0123456789abcdef",
			Ready:        ready,
			Started:      &started,
			RestartCount: restarts,
			State:        state,
		}
	}

	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              "frontend-7d4b9c6f5-x2x9q",
			GenerateName:      "frontend-7d4b9c6f5-",
			Namespace:         "shop",
			UID:               types.UID("0f2c7a9e-8a61-4f0c-9d8e-2b7f1e3c5a4d"),
			ResourceVersion:   "123456789",
			Generation:        1,
			CreationTimestamp: created,
			Labels: map[string]string{
				"app.kubernetes.io/name":      "frontend",
				"app.kubernetes.io/component": "web",
				"pod-template-hash":           "7d4b9c6f5",
				"tier":                        "frontend",
			},
			Annotations: map[string]string{
				"kubernetes.io/config.seen":   "2026-11-29T15:00:00.000000000Z",
				"kubernetes.io/config.source": "api",
				"prometheus.io/scrape":        "true",
				"prometheus.io/port":          "9090",
				"example.com/description": "The storefront web tier. It serves the catalogue and the cart " +
					"and talks to the checkout and inventory services over mTLS through the sidecar proxy.",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "frontend-7d4b9c6f5",
				UID: types.UID("6b1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"), Controller: &ctrl, BlockOwnerDeletion: &ctrl,
			}},
			Finalizers: []string{"example.com/cleanup"},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "init-config", Image: "busybox:1.37", Command: []string{"sh", "-c", "cp /src/* /config/"},
					Resources: resources("10m", "16Mi")},
			},
			Containers: []corev1.Container{
				container("web", "registry.example.com/shop/web:v1.2.3", 8080),
				container("sidecar", "registry.example.com/shop/proxy:v0.9.0", 15001),
				container("metrics", "registry.example.com/shop/exporter:v2.0.1", 9090),
				container("worker", "registry.example.com/shop/worker:v1.2.3", 7070),
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "frontend-config"}}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: &sizeLimit}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			},
			SecurityContext: &corev1.PodSecurityContext{
				SupplementalGroups: []int64{1000, 2000, 70000},
				FSGroup:            &user,
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "frontend",
			NodeName:                      "node-a.example.com",
			SchedulerName:                 "default-scheduler",
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &grace},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: finished, Reason: "ContainersNotReady", Message: "containers with unready status: [metrics]"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: finished},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			HostIP:    "10.0.0.11",
			HostIPs:   []corev1.HostIP{{IP: "10.0.0.11"}, {IP: "fd00::11"}},
			PodIP:     "10.244.1.23",
			PodIPs:    []corev1.PodIP{{IP: "10.244.1.23"}, {IP: "fd00:244::23"}},
			StartTime: &started,
			QOSClass:  corev1.PodQOSBurstable,
			InitContainerStatuses: []corev1.ContainerStatus{
				status("init-config", "busybox:1.37", false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: created, FinishedAt: started}}, 0),
			},
			ContainerStatuses: []corev1.ContainerStatus{
				status("web", "registry.example.com/shop/web:v1.2.3", true,
					corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, 0),
				status("sidecar", "registry.example.com/shop/proxy:v0.9.0", true,
					corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, 1),
				status("metrics", "registry.example.com/shop/exporter:v2.0.1", false,
					corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 137, Reason: "OOMKilled", StartedAt: started, FinishedAt: finished}}, 4),
				func() corev1.ContainerStatus {
					s := status("worker", "registry.example.com/shop/worker:v1.2.3", false,
						corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
							Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=worker"}}, 3)
					s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 1, Reason: "Error", StartedAt: started, FinishedAt: finished}}
					return s
				}(),
			},
		},
	}
}

// marshalPod encodes pod as the server stores it, with k8s.io/api's Marshal.
func marshalPod(tb testing.TB, pod *corev1.Pod) []byte {
	tb.Helper()
	b, err := pod.Marshal()
	if err != nil {
		tb.Fatalf("marshal pod: %v", err)
	}
	return b
}

// TestRichPodSize checks that the rich pod, which the projection tests and
// benchmarks use as a realistic pod, encodes to the size of one: between 4
// and 8 KiB, as the pods (about 5.5 KB) that the kubelet's own Pods API was
// measured with. A pod outside this band would make the benchmarks' figures
// per pod incomparable with those measurements.
func TestRichPodSize(t *testing.T) {
	const minBytes, maxBytes = 4 << 10, 8 << 10
	if n := len(marshalPod(t, richPod())); n < minBytes || n >= maxBytes {
		t.Errorf("rich pod: %d bytes, want [%d, %d)", n, minBytes, maxBytes)
	}
}
