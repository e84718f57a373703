package kubeapi

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsapi/podsapi/internal/kindtable"
)

// The owner kinds of pods (the kinds agents read to name a pod's
// workload), which the handler serves with WithResource, each from a
// store of its own (kindstore).
var (
	replicaSets  = appsv1.SchemeGroupVersion.WithResource("replicasets")
	deployments  = appsv1.SchemeGroupVersion.WithResource("deployments")
	statefulSets = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	daemonSets   = appsv1.SchemeGroupVersion.WithResource("daemonsets")
	jobs         = batchv1.SchemeGroupVersion.WithResource("jobs")
	cronJobs     = batchv1.SchemeGroupVersion.WithResource("cronjobs")
)

// kindResources are the resources WithResource serves, by group version
// resource: the namespaces, the nodes and the owner kinds.
var kindResources = map[schema.GroupVersionResource]func(PodReader) *resource{
	corev1.SchemeGroupVersion.WithResource("namespaces"): namespacesResource,
	corev1.SchemeGroupVersion.WithResource("nodes"):      nodesResource,
	replicaSets: func(r PodReader) *resource {
		return kindResource(replicaSets, "ReplicaSet", r, func() *appsv1.ReplicaSet { return &appsv1.ReplicaSet{} },
			runtime.DefaultMetaV1FieldSelectorConversion, kindtable.ReplicaSetColumns,
			func(o *appsv1.ReplicaSet) tableCells { return kindtable.ReplicaSetRowOf(o) })
	},
	deployments: func(r PodReader) *resource {
		return kindResource(deployments, "Deployment", r, func() *appsv1.Deployment { return &appsv1.Deployment{} },
			runtime.DefaultMetaV1FieldSelectorConversion, kindtable.DeploymentColumns,
			func(o *appsv1.Deployment) tableCells { return kindtable.DeploymentRowOf(o) })
	},
	statefulSets: func(r PodReader) *resource {
		return kindResource(statefulSets, "StatefulSet", r, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} },
			runtime.DefaultMetaV1FieldSelectorConversion, kindtable.StatefulSetColumns,
			func(o *appsv1.StatefulSet) tableCells { return kindtable.StatefulSetRowOf(o) })
	},
	daemonSets: func(r PodReader) *resource {
		return kindResource(daemonSets, "DaemonSet", r, func() *appsv1.DaemonSet { return &appsv1.DaemonSet{} },
			runtime.DefaultMetaV1FieldSelectorConversion, kindtable.DaemonSetColumns,
			func(o *appsv1.DaemonSet) tableCells { return kindtable.DaemonSetRowOf(o) })
	},
	jobs: func(r PodReader) *resource {
		return kindResource(jobs, "Job", r, func() *batchv1.Job { return &batchv1.Job{} },
			jobFieldLabel, kindtable.JobColumns,
			func(o *batchv1.Job) tableCells { return kindtable.JobRowOf(o) })
	},
	cronJobs: func(r PodReader) *resource {
		return kindResource(cronJobs, "CronJob", r, func() *batchv1.CronJob { return &batchv1.CronJob{} },
			runtime.DefaultMetaV1FieldSelectorConversion, kindtable.CronJobColumns,
			func(o *batchv1.CronJob) tableCells { return kindtable.CronJobRowOf(o) })
	},
}

// jobFieldLabel is the API server's conversion of the field labels of
// jobs (k8s.io/kubernetes pkg/apis/batch/v1: addConversionFuncs); the
// other owner kinds register none, and so have apimachinery's default
// (runtime.DefaultMetaV1FieldSelectorConversion: metadata.name and
// metadata.namespace).
func jobFieldLabel(label, value string) (string, string, error) {
	switch label {
	case "metadata.name", "metadata.namespace", "status.successful":
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label %q not supported for Job", label)
}
