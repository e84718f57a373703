// Package podtypes is the vocabulary of pods that the store, the server and
// the client share: the types of watch events, and the fields of a pod that
// a field selector may name, with their values. The client applies selectors
// itself to a server without them; it does so with these definitions, so
// that its selection cannot drift from the server's.
//
// It is a leaf: it imports only k8s.io/api and k8s.io/apimachinery.
package podtypes
