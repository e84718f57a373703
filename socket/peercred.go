package socket

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"
)

// Cred is what the kernel says about the process at the other end of a
// UNIX socket connection, as it was when that process connected.
type Cred struct {
	PID int32
	UID uint32
	GID uint32 // the effective group
	// Groups are the supplementary groups (SO_PEERGROUPS, Linux 4.13 and
	// later); nil when the kernel does not tell them.
	Groups []uint32
}

// soPeerGroups is SO_PEERGROUPS, missing from package syscall.
const soPeerGroups = 59

// maxPeerGroups bounds the supplementary groups read (NGROUPS_MAX is 65536).
const maxPeerGroups = 65536

// PeerCred returns the credentials of the peer of c, a UNIX socket
// connection, with SO_PEERCRED (and SO_PEERGROUPS when the kernel has it).
func PeerCred(c net.Conn) (Cred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Cred{}, fmt.Errorf("%T is not a socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var cred Cred
	var serr error
	err = raw.Control(func(fd uintptr) {
		var u *syscall.Ucred
		u, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if serr != nil {
			return
		}
		cred = Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid}
		cred.Groups = peerGroups(int(fd))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return Cred{}, fmt.Errorf("read the peer credentials: %w", err)
	}
	return cred, nil
}

// peerGroups returns the supplementary groups of the peer of fd, or nil.
func peerGroups(fd int) []uint32 {
	buf := make([]uint32, 64)
	for {
		size := uint32(len(buf) * 4)
		_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), syscall.SOL_SOCKET, soPeerGroups,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			return buf[:size/4]
		case errors.Is(errno, syscall.ERANGE) && int(size/4) > len(buf) && size/4 <= maxPeerGroups:
			buf = make([]uint32, size/4)
		default:
			return nil
		}
	}
}
