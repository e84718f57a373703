package childproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU returns the user and system CPU time process pid has used.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, errors.New("childproc: malformed /proc stat")
	}
	f := strings.Fields(s[i+2:])
	// Fields after the command: state(3) ... utime(14) stime(15), 1-based.
	if len(f) < 15-2 {
		return 0, errors.New("childproc: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[14-3], 10, 64)
	st, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("childproc: /proc stat: %w", err)
	}
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

// RSS returns the resident set size (VmRSS) of process pid in bytes.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("childproc: no VmRSS in /proc status")
}

// FDs returns the number of open file descriptors of process pid.
func FDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}

// RunTime returns the time the threads of process pid have run on a CPU,
// in nanoseconds (the first field of /proc/PID/task/*/schedstat): finer
// than CPU's 10 ms ticks. Threads that exited are not counted.
func RunTime(pid int) (time.Duration, error) {
	var total time.Duration
	n, err := eachTask(pid, "schedstat", func(s string) {
		if f := strings.Fields(s); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("childproc: no schedstat of process %d", pid)
	}
	return total, err
}

// ContextSwitches returns the context switches, voluntary and not, of the
// threads of process pid (/proc/PID/task/*/status). Threads that exited are
// not counted.
func ContextSwitches(pid int) (int64, error) {
	var total int64
	_, err := eachTask(pid, "status", func(s string) {
		for l := range strings.SplitSeq(s, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += c
			}
		}
	})
	return total, err
}

// eachTask calls fn with the file name of each thread of process pid that
// could be read, and returns how many were.
func eachTask(pid int, name string, fn func(string)) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/%s", pid, name))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fn(string(b))
		n++
	}
	return n, nil
}
