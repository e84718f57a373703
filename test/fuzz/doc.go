// Package fuzz holds the fuzz targets of packages whose own tests import far
// more than the package itself: go test -fuzz instruments every package the
// test binary links, so a target in such a package's tests would instrument
// its tests' clients and rigs too (kubeapi's tests link client-go's
// clientset, the API server's rigs and the agents' libraries: 959 packages,
// where kubeapi needs 376). Here a target links only what it calls.
package fuzz
