package store

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// openStore opens a store in dir and closes it when the test ends.
func openStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := openStore(t, dir, Options{})
	if got, want := s.Path(), filepath.Join(dir, FileName); got != want {
		t.Errorf("Path() = %s, want %s", got, want)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, s.Path(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	data, err := os.ReadFile(ownerPath(s.Path()))
	if err != nil {
		t.Fatalf("owner record while open: %v", err)
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil || o.PID != os.Getpid() {
		t.Errorf("owner record %s: pid %d, err %v; want pid %d", data, o.PID, err, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ownerPath(s.Path())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("owner record still there after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenTwiceFailsFast(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})

	start := time.Now()
	second, err := Open(dir, Options{})
	if err == nil {
		second.Close()
		t.Fatal("second Open of the same state file succeeded")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("second Open took %v to fail, want under 1s", took)
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("error %v does not wrap ErrLocked", err)
	}
	msg := err.Error()
	for _, want := range []string{s.Path(), "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	// A read-only open is refused too while the writer holds the file.
	if ro, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
		if ro != nil {
			ro.Close()
		}
		t.Errorf("read-only Open while held: err %v, want ErrLocked", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := openStore(t, dir, Options{})
	again.Close()
}

// TestLockedErrorMessages checks what the message says for each kind of owner record.
func TestLockedErrorMessages(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run a process to get a dead pid: %v", err)
	}
	host, _ := os.Hostname()
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		owner *Owner
		want  []string
	}{
		{"another process", &Owner{PID: os.Getppid(), Hostname: host, Started: since, Command: []string{"/usr/bin/mcp-gateway", "serve", "-c", "x.yaml"}},
			[]string{"in use by another process", "pid " + strconv.Itoa(os.Getppid()), "mcp-gateway serve", "2025-03-01T12:00:00Z", "admin API"}},
		{"stale owner record", &Owner{PID: dead.Process.Pid, Hostname: host, Started: since, Command: []string{"mcp-gateway", "serve"}},
			[]string{"stale", "pid " + strconv.Itoa(dead.Process.Pid), "no longer running"}},
		{"other host", &Owner{PID: 1, Hostname: host + "-elsewhere", Started: since, Command: []string{"mcp-gateway", "serve"}},
			[]string{"in use by another process", "on host " + host + "-elsewhere"}},
		{"no owner record", nil, []string{"in use by another process", "no owner record"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, Options{})
			if tt.owner == nil {
				os.Remove(ownerPath(s.Path()))
			} else {
				data, _ := json.Marshal(tt.owner)
				if err := os.WriteFile(ownerPath(s.Path()), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("err %v, want ErrLocked", err)
			}
			for _, want := range append(tt.want, s.Path()) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing state file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only Open created the state file: %v", err)
	}

	s := openStore(t, dir, Options{})
	if err := s.PutLockout(Lockout{Server: "arm", Tool: "arm__move"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro := openStore(t, dir, Options{ReadOnly: true})
	if _, ok := ro.Lockout("arm"); !ok {
		t.Error("read-only store does not show the stored lockout")
	}
	if err := ro.PutLockout(Lockout{Server: "base"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("PutLockout read-only: %v, want ErrReadOnly", err)
	}
	if _, err := ro.Audit().AppendSync(t.Context(), Record{Type: RecordOperator}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("AppendSync read-only: %v, want ErrReadOnly", err)
	}
	// Two readers may share the file.
	ro2 := openStore(t, dir, Options{ReadOnly: true})
	if n, bad := ro2.AuditVerify(); bad != nil || n != 0 {
		t.Errorf("AuditVerify on a reader: %d, %v", n, bad)
	}
}

func TestNoGoroutineLeakAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 5 {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			s.Audit().Append(callRecord("arm", "move", i))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
