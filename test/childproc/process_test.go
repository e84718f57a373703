package childproc_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podsapi/podsapi/test/childproc"
)

// The roles of the test binary's children.
const (
	roleEcho  = "echo"  // says "ready", then echoes stdin lines until EOF
	roleFail  = "fail"  // says "ready", then exits 3 with a message on stderr
	roleHang  = "hang"  // says "ready", then ignores SIGTERM and stdin
	roleQuiet = "quiet" // exits 0 without a word
)

func TestMain(m *testing.M) {
	switch childproc.Role() {
	case "":
		os.Exit(m.Run())
	case roleEcho:
		fmt.Println("ready")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("echo " + sc.Text())
		}
	case roleFail:
		fmt.Println("ready")
		fmt.Fprintln(os.Stderr, "something broke")
		os.Exit(3)
	case roleHang:
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour) // a child that hangs, until the test kills it
	case roleQuiet:
	}
	os.Exit(0)
}

func start(t *testing.T, role string) *childproc.Process {
	t.Helper()
	p, err := childproc.Start(childproc.Spec{Role: role})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestTalk checks a conversation over stdin and stdout and a clean exit.
func TestTalk(t *testing.T) {
	p := start(t, roleEcho)
	if _, err := p.Expect(timeout(t), "ready"); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdin(), "hello")
	if line, err := p.Expect(timeout(t), "echo"); err != nil || line != "echo hello" {
		t.Fatalf("Expect: %q, %v; want \"echo hello\"", line, err)
	}
	fmt.Fprintln(p.Stdin(), "unread") // Wait discards it
	p.CloseStdin()
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

// TestFailures checks the errors of a child that exits badly, says the
// wrong thing, says nothing, or will not exit.
func TestFailures(t *testing.T) {
	t.Run("exit status, with stderr", func(t *testing.T) {
		p := start(t, roleFail)
		if _, err := p.Expect(timeout(t), "ready"); err != nil {
			t.Fatal(err)
		}
		err := p.Wait(30 * time.Second)
		if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "something broke") {
			t.Errorf("Wait: %v, want exit status 3 and the child's stderr", err)
		}
	})
	t.Run("unexpected line", func(t *testing.T) {
		p := start(t, roleEcho)
		if _, err := p.Expect(timeout(t), "serving"); err == nil || !strings.Contains(err.Error(), `said "ready"`) {
			t.Errorf("Expect: %v, want what the child said", err)
		}
	})
	t.Run("exit before a line", func(t *testing.T) {
		p := start(t, roleQuiet)
		if _, err := p.Next(timeout(t)); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Errorf("Next: %v, want an exit", err)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		p := start(t, roleHang)
		if _, err := p.Expect(timeout(t), "ready"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := p.Next(ctx); err == nil {
			t.Error("Next with an ended context: no error")
		}
	})
	t.Run("killed after the timeout", func(t *testing.T) {
		p := start(t, roleHang)
		if _, err := p.Expect(timeout(t), "ready"); err != nil {
			t.Fatal(err)
		}
		p.Signal(syscall.SIGTERM)
		if err := p.Wait(10 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
			t.Errorf("Wait: %v, want a timeout", err)
		}
		select {
		case <-p.Exited():
		default:
			t.Error("the child still runs after Wait killed it")
		}
	})
	t.Run("no role", func(t *testing.T) {
		if _, err := childproc.Start(childproc.Spec{}); err == nil {
			t.Error("Start without a role: no error")
		}
	})
}

// TestProc checks the readings of /proc on this process.
func TestProc(t *testing.T) {
	pid := os.Getpid()
	if rss, err := childproc.RSS(pid); err != nil || rss <= 0 {
		t.Errorf("RSS: %d, %v", rss, err)
	}
	if n, err := childproc.FDs(pid); err != nil || n < 3 {
		t.Errorf("FDs: %d, %v; want stdin, stdout and stderr at least", n, err)
	}
	if _, err := childproc.CPU(pid); err != nil {
		t.Errorf("CPU: %v", err)
	}
	if d, err := childproc.RunTime(pid); err != nil || d <= 0 {
		t.Errorf("RunTime: %v, %v; this test has run", d, err)
	}
	if n, err := childproc.ContextSwitches(pid); err != nil || n <= 0 {
		t.Errorf("ContextSwitches: %d, %v; this test's threads have been switched", n, err)
	}
	if _, err := childproc.RSS(-1); err == nil {
		t.Error("RSS of no process: no error")
	}
	if _, err := childproc.RunTime(-1); err == nil {
		t.Error("RunTime of no process: no error")
	}
}
