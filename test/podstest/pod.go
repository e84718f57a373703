// Package podstest builds realistic pods and running servers for tests and
// benchmarks.
package podstest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// epoch is the creation time of every pod Pod builds, so that its encoding
// is deterministic.
var epoch = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// UID returns the UID Pod gives the pod named name in namespace ns.
func UID(ns, name string) types.UID {
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", hash(ns+"/"+name)))
}

// hash is FNV-1a, truncated to 48 bits.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h & (1<<48 - 1)
}

// Pod returns a realistic running pod of about 5 KB of protobuf: an init
// container, an application container and a sidecar, with statuses,
// conditions, labels, annotations, an owner reference, resources, probes
// and environment. ip is the last byte of its pod IP.
func Pod(ns, name string, ip int) *corev1.Pod {
	created := metav1.NewTime(epoch)
	started := metav1.NewTime(epoch.Add(5 * time.Second))
	ready := metav1.NewTime(epoch.Add(12 * time.Second))
	podIP := fmt.Sprintf("10.244.%d.%d", (ip/250)%250, ip%250+2)
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("1"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
	}
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	running := func(name, image string, restarts int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Ready: true, RestartCount: restarts, Image: image,
			ImageID:     "docker.io/library/" + image + "@sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac",
			ContainerID: "containerd://" + fmt.Sprintf("%064x", hash(name+podIP)),
			Started:     new(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: UID(ns, name),
			ResourceVersion: "1", GenerateName: name[:max(len(name)-5, 1)],
			CreationTimestamp: created,
			Labels: map[string]string{
				"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": name,
				"app.kubernetes.io/component": "frontend", "pod-template-hash": "7d9f8b6c5d", "tier": "web",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/default-container": "app",
				"prometheus.io/scrape":                    "true",
				"prometheus.io/port":                      "9090",
				"kubernetes.io/config.seen":               epoch.Format(time.RFC3339Nano),
				"kubernetes.io/config.source":             "api",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d",
				UID: "6a1d9e0c-3b7f-4c2e-9f1a-2d4b6c8e0a13", Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "init-config", Image: "busybox:1.37",
				Command:      []string{"sh", "-c", "cp /config-src/* /config/ && echo ready"},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}},
				Resources:    resources,
			}},
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example.com/web/app:v1.42.3",
					Args:  []string{"--listen=:8080", "--metrics=:9090", "--log-format=json"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
						{Name: "LOG_LEVEL", Value: "info"},
						{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-db"}, Key: "url"}}},
					},
					Resources:      resources,
					LivenessProbe:  probe("/healthz", 8080),
					ReadinessProbe: probe("/readyz", 8080),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/app", ReadOnly: true},
						{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
					},
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
				{
					Name: "log-shipper", Image: "fluent/fluent-bit:3.2.4",
					Args:                   []string{"--config=/fluent-bit/etc/fluent-bit.yaml"},
					Resources:              corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					VolumeMounts:           []corev1.VolumeMount{{Name: "varlog", MountPath: "/var/log", ReadOnly: true}},
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "varlog", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: new(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "web", NodeName: "node-1", SchedulerName: "default-scheduler",
			TerminationGracePeriodSeconds: new(int64(30)), EnableServiceLinks: new(true),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP: "192.168.10.21", HostIPs: []corev1.HostIP{{IP: "192.168.10.21"}},
			PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
			StartTime: &created, QOSClass: corev1.PodQOSBurstable,
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "init-config", Ready: true, Image: "busybox:1.37",
				ImageID:     "docker.io/library/busybox@sha256:2919d0172f7524b2d8df9e50066a682669e6d170ac0f6a49676d54358fe970b5",
				ContainerID: "containerd://" + fmt.Sprintf("%064x", hash("init"+podIP)),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: created, FinishedAt: started,
					ContainerID: "containerd://" + fmt.Sprintf("%064x", hash("init"+podIP)),
				}},
			}},
			ContainerStatuses: []corev1.ContainerStatus{
				running("app", "registry.example.com/web/app:v1.42.3", 0),
				running("log-shipper", "fluent/fluent-bit:3.2.4", 1),
			},
		},
	}
}
