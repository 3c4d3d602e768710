package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// boundedServer serves h as the gateway does: under bodyDeadline (with readBody in front of h
// when read is set) and, when most > 0, behind a connLimiter of most connections.
func boundedServer(t *testing.T, timeout time.Duration, most int, read bool, h http.Handler) (*httptest.Server, *httpMetrics) {
	t.Helper()
	m := httpMetricsFor(nil)
	log := slog.New(slog.DiscardHandler)
	if read {
		h = readBody(1<<20, timeout, func(http.ResponseWriter, *http.Request, []byte) bool { return true }, h)
	}
	srv := httptest.NewUnstartedServer(bodyDeadline(timeout, m, log, h))
	srv.Config.ReadHeaderTimeout = headerTimeout
	if most > 0 {
		cl := newConnLimiter(srv.Listener, most, m, log)
		srv.Listener = cl
		srv.Config.ConnState = cl.connState
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, m
}

// rawConn is a client connection that writes exactly what a test says.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// startSlowPost sends the headers of a POST announcing a 1000-byte body, then one byte of it
// every 100 ms until the connection breaks or the test ends.
func (c *rawConn) startSlowPost(t *testing.T, extraHeaders string) {
	t.Helper()
	if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"+extraHeaders+"Content-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 999; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// response reads one response within d.
func (c *rawConn) response(t *testing.T, d time.Duration) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("no response within %s: %v", d, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closedWithin reports whether the server closes the connection within d: EOF, or a reset
// when it closed with bytes of ours unread.
func (c *rawConn) closedWithin(d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.r)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestBodyDeadlineAnswersATricklingBody408AndCloses(t *testing.T) {
	const timeout = 300 * time.Millisecond
	reached := make(chan struct{}, 1)
	srv, m := boundedServer(t, timeout, 0, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
	}))
	c := dialRaw(t, srv.Listener.Addr().String())
	start := time.Now()
	c.startSlowPost(t, "")
	resp, body := c.response(t, 5*time.Second)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "gateway.body_read_timeout") {
		t.Fatalf("got %d %q, want 408 naming gateway.body_read_timeout", resp.StatusCode, body)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("answered after %s, want about %s", took, timeout)
	}
	if !c.closedWithin(time.Second) {
		t.Error("the connection stayed open after the 408")
	}
	if got := testutil.ToFloat64(m.bodyTimeouts); got != 1 {
		t.Errorf("http_body_timeouts_total = %v, want 1", got)
	}
	select {
	case <-reached:
		t.Error("the handler ran on a body that never arrived")
	default:
	}
}

func TestBodyDeadlineAnswersARefusalAtOnce(t *testing.T) {
	// Like requirePrincipal: refuses without reading the body.
	srv, m := boundedServer(t, 3*time.Second, 0, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusUnauthorized, "a bearer token is required")
	}))
	c := dialRaw(t, srv.Listener.Addr().String())
	start := time.Now()
	c.startSlowPost(t, "")
	resp, _ := c.response(t, 2*time.Second)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("got %d, want 401", resp.StatusCode)
	}
	if !c.closedWithin(time.Second) {
		t.Error("the connection stayed open, waiting for a body nobody reads")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("answered and closed after %s; the body deadline is 3s and must not be waited for", took)
	}
	if got := testutil.ToFloat64(m.bodyTimeouts); got != 0 {
		t.Errorf("http_body_timeouts_total = %v, want 0: the refusal read nothing", got)
	}
}

func TestBodyDeadlineDoesNotCutALongCall(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv, _ := boundedServer(t, timeout, 0, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(4 * timeout): // a call running well past the body deadline
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusGatewayTimeout)
			return
		}
		_, _ = w.Write(b)
	}))
	client := srv.Client()
	for i := range 2 { // the second on the same kept-alive connection
		resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"call":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != `{"call":1}` {
			t.Fatalf("request %d: got %d %q, want the call's answer", i, resp.StatusCode, b)
		}
	}
	// A GET stream has no body and no deadline.
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET: got %d, want 200 after %s", resp.StatusCode, 4*timeout)
	}
}

func TestReadBodyRefusesALargeBody(t *testing.T) {
	srv, _ := boundedServer(t, time.Second, 0, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(strings.Repeat("x", 1<<20+1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "gateway.max_body_bytes") {
		t.Errorf("got %d %q, want 413 naming gateway.max_body_bytes", resp.StatusCode, b)
	}
}

func TestConnLimiterClosesTheLongestSilentToAdmitANewOne(t *testing.T) {
	srv, m := boundedServer(t, time.Second, 2, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	addr := srv.Listener.Addr().String()
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	waitFor(t, func() bool { return testutil.ToFloat64(m.open) == 2 })
	third := dialRaw(t, addr)
	if _, err := io.WriteString(third, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := third.response(t, 2*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new connection got %d, want 200", resp.StatusCode)
	}
	if !first.closedWithin(time.Second) {
		t.Error("the connection silent longest was not closed")
	}
	if second.closedWithin(100 * time.Millisecond) {
		t.Error("the younger silent connection was closed too")
	}
	if got := testutil.ToFloat64(m.evicted); got != 1 {
		t.Errorf("http_connections_evicted_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.open); got != 2 {
		t.Errorf("http_connections = %v, want 2", got)
	}
	second.Close()
	third.Close()
	waitFor(t, func() bool { return testutil.ToFloat64(m.open) == 0 })
}

func TestConnLimiterRefusesWhenAllAreBusy(t *testing.T) {
	release := make(chan struct{})
	srv, m := boundedServer(t, time.Second, 2, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-release // a long call or a stream
		}
	}))
	addr := srv.Listener.Addr().String()
	for range 2 {
		if _, err := io.WriteString(dialRaw(t, addr), "GET /busy HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return testutil.ToFloat64(m.open) == 2 })
	time.Sleep(50 * time.Millisecond) // both requests in their handlers
	start := time.Now()
	resp, err := srv.Client().Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "gateway.max_connections") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d %q, want 503 with Retry-After naming gateway.max_connections", resp.StatusCode, b)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("refused after %s; a refusal must be quick", took)
	}
	if got := testutil.ToFloat64(m.refused); got != 1 {
		t.Errorf("http_connections_refused_total = %v, want 1", got)
	}
	close(release)
	waitFor(t, func() bool {
		resp, err := srv.Client().Get(srv.URL + "/other")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func TestConnectionCapFitsTheFileLimit(t *testing.T) {
	for _, tc := range []struct {
		want      int
		fileLimit uint64
		got       int
	}{
		{512, 0, 512},          // unknown
		{512, 1 << 20, 512},    // plenty
		{512, 256, 192},        // the limit leaves room for 192
		{512, 100, 50},         // a tiny limit: half of it
		{20, 100, 20},          // below it anyway
		{512, ^uint64(0), 512}, // unlimited
	} {
		if got := connectionCap(tc.want, tc.fileLimit); got != tc.got {
			t.Errorf("connectionCap(%d, %d) = %d, want %d", tc.want, tc.fileLimit, got, tc.got)
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

func TestConnLimiterClosesAnIdleConnectionToAdmitANewOne(t *testing.T) {
	srv, m := boundedServer(t, time.Second, 2, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	addr := srv.Listener.Addr().String()
	idle := dialRaw(t, addr)
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := idle.response(t, 2*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d, want 200", resp.StatusCode)
	}
	time.Sleep(20 * time.Millisecond) // idle since
	silent := dialRaw(t, addr)
	waitFor(t, func() bool { return testutil.ToFloat64(m.open) == 2 })
	third := dialRaw(t, addr)
	if _, err := io.WriteString(third, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := third.response(t, 2*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new connection got %d, want 200", resp.StatusCode)
	}
	if !idle.closedWithin(time.Second) {
		t.Error("the connection idle longest was not closed")
	}
	if silent.closedWithin(100 * time.Millisecond) {
		t.Error("the connection silent for less time was closed")
	}
}
