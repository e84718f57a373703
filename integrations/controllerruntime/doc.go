// Package controllerruntime runs controller-runtime's cache (the
// framework most node-local controllers and operators are built on),
// unchanged and configured as a node-local controller configures it,
// against podsapi's front door and directly against the API server, with
// the same answers expected. The package has tests only.
package controllerruntime
