package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client"
)

// identityFields are the fields that name a pod.
var identityFields = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// parsePodRef splits ref, a UID or NAMESPACE/NAME, into namespace and name;
// both are "" for a UID.
func parsePodRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok {
		return "", "", nil
	}
	if namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("invalid pod %q: want a UID or NAMESPACE/NAME", ref)
	}
	return namespace, name, nil
}

// resolve returns the UID of the pod ref names: ref itself for a UID, or
// for NAMESPACE/NAME the UID of the pod of that namespace and name, which a
// List of the pods' identities finds (a namespace and name name one pod at
// a time). The pod is then read by UID, with the user's field mask, so that
// get prints the same by either name.
func resolve(ctx context.Context, c *client.Client, ref string) (types.UID, error) {
	namespace, name, err := parsePodRef(ref)
	if err != nil {
		return "", err
	}
	if name == "" {
		return types.UID(ref), nil
	}
	pods, err := c.List(ctx, client.WithFields(identityFields...))
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.Namespace == namespace && p.Name == name {
			return p.UID, nil
		}
	}
	return "", fmt.Errorf("%w: no pod named %q in namespace %q on this node", client.ErrNotFound, name, namespace)
}
