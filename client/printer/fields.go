package printer

// tableFields are the field paths the table's columns are computed from:
// NAMESPACE and NAME from the metadata, AGE from the metadata or
// status.startTime, READY, STATUS and RESTARTS with
// kubectl's rules (Summarize), which read the containers, the conditions and
// every container status, not just status.phase.
var tableFields = []string{
	"metadata.namespace",
	"metadata.name",
	"metadata.creationTimestamp",
	"metadata.deletionTimestamp",
	"spec.containers.name",
	"spec.initContainers.name",
	"spec.initContainers.restartPolicy",
	"status.phase",
	"status.reason",
	"status.startTime",
	"status.conditions.type",
	"status.conditions.status",
	"status.conditions.reason",
	"status.initContainerStatuses.name",
	"status.initContainerStatuses.ready",
	"status.initContainerStatuses.started",
	"status.initContainerStatuses.restartCount",
	"status.initContainerStatuses.state",
	"status.initContainerStatuses.lastState.terminated.finishedAt",
	"status.containerStatuses.name",
	"status.containerStatuses.ready",
	"status.containerStatuses.restartCount",
	"status.containerStatuses.state",
	"status.containerStatuses.lastState.terminated.finishedAt",
}

// wideFields are the field paths of the columns Wide adds.
var wideFields = []string{
	"status.podIP",
	"status.podIPs",
	"spec.nodeName",
	"metadata.uid",
}

// Fields returns the field paths format f prints from, in Kubernetes JSON
// names, or nil when f prints whatever it gets (JSON and YAML). A caller
// that sends a field mask adds them to it, so that a table never shows a
// value it did not receive: a blank namespace, "0/0" ready, or "Running"
// for a pod whose container statuses say CrashLoopBackOff. The caller may
// modify the returned slice.
func Fields(f Format) []string {
	switch f {
	case Table:
		return append([]string(nil), tableFields...)
	case Wide:
		return append(append([]string(nil), tableFields...), wideFields...)
	case Name:
		return []string{"metadata.name"}
	default:
		return nil
	}
}
