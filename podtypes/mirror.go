package podtypes

// MirrorPodUIDAnnotation is the annotation under which a source that reads
// a mirror pod from the API server keeps the mirror pod's own UID, when it
// serves the pod under its static pod's UID (the value of
// kubernetes.io/config.mirror), as a kubelet does: the Kubernetes API served
// by podsapi (package kubeapi) gives the pod back its API server's UID and
// drops the annotation, so that an informer's cache through podsapi equals
// one on the API server.
const MirrorPodUIDAnnotation = "podsapi.io/mirror-pod-uid"
