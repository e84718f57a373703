// Package kubeapi serves the node's pods through the Kubernetes API.
//
// This file is a placeholder for the type of branch fdserve, which owns the
// package: it is removed when that branch is merged.
package kubeapi

// Access is the resource attributes of a SubjectAccessReview that a request
// needs.
type Access struct{ Verb, Namespace, Resource, Subresource, Name string }
