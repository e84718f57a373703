//go:build !race

package stress

// raceEnabled says the binary is built with the race detector, whose shadow
// memory (several times the heap) is no memory the server's budget bounds.
const raceEnabled = false
