package lockproxy

// Tests against a real lockproxy and Redis: run by tests/clients/run.sh
// lib-go (ctest clients.lib_go), which starts them and sets LP_PORT,
// LP_TLS_PORT, LP_UNIX (the proxy's Unix socket), LP_CA, LP_CLIENT_CERT, LP_CLIENT_KEY; the proxy runs with
// --lock-watchdog-timeout 900. Without LP_PORT the tests are skipped.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

func addr(t *testing.T, env string) string {
	t.Helper()
	port := os.Getenv(env)
	if port == "" {
		t.Skip(env + " is not set: run through tests/clients/run.sh lib-go")
	}
	return "127.0.0.1:" + port
}

func newPool(t *testing.T, dial func() (redis.Conn, error)) *redis.Pool {
	p := &redis.Pool{Dial: dial, MaxIdle: 16}
	t.Cleanup(func() { p.Close() })
	return p
}

func plainClient(t *testing.T) *Client {
	a := addr(t, "LP_PORT")
	// A read timeout, as pools usually have: waits must not be cut by it.
	return New(newPool(t, func() (redis.Conn, error) {
		return redis.Dial("tcp", a, redis.DialReadTimeout(500*time.Millisecond))
	}))
}

// hammer: goroutines share c and lock/unlock names; inside the critical
// section a per-name flag must be free (exclusion) and a counter grows.
func hammer(t *testing.T, c *Client, names []string, workers, rounds int) {
	var inside = make([]int32, len(names))
	var count int64
	var wg sync.WaitGroup
	errs := make(chan error, 3*workers*rounds) // at most 3 a round
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				n := (w + i) % len(names)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				h, err := c.Lock(ctx, names[n])
				cancel()
				if err != nil {
					errs <- err
					continue
				}
				if !atomic.CompareAndSwapInt32(&inside[n], 0, 1) {
					errs <- fmt.Errorf("two holders of %s", names[n])
				}
				time.Sleep(time.Millisecond)
				atomic.AddInt64(&count, 1)
				atomic.StoreInt32(&inside[n], 0)
				if err := h.Unlock(); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if count != int64(workers*rounds) {
		t.Fatalf("%d critical sections ran, want %d", count, workers*rounds)
	}
}

func TestGoroutinesShareOneClient(t *testing.T) {
	c := plainClient(t)
	hammer(t, c, []string{"go:shared:a", "go:shared:b", "go:shared:c"}, 16, 40)
	if n := c.Pool.ActiveCount(); n != c.Pool.IdleCount() {
		t.Fatalf("%d connections still out of the pool", n-c.Pool.IdleCount())
	}
}

func TestBoundedPoolShared(t *testing.T) {
	a := addr(t, "LP_PORT")
	p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", a) },
		MaxActive: 4, Wait: true}
	defer p.Close()
	hammer(t, New(p), []string{"go:bounded"}, 8, 20)
}

func TestHoldOutlivesWatchdogTimeout(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:renewed")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // over twice the proxy's 900 ms
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestWaitWokenByAnotherClient(t *testing.T) {
	holder, waiter := plainClient(t), plainClient(t)
	h, err := holder.Lock(context.Background(), "go:wake")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := waiter.Lock(ctx, "go:wake")
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		w.Unlock()
	}()
	select {
	case <-got:
		t.Fatal("the waiter got the lock while it was held")
	case <-time.After(300 * time.Millisecond):
	}
	released := time.Now()
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}
	at := <-got
	if d := at.Sub(released); d > time.Second || d < 0 {
		t.Fatalf("woken %v after the release", d)
	}
}

func TestWaitRunsOut(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:busy")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock()
	if _, err := c.TryLock(context.Background(), "go:busy"); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryLock: %v", err)
	}
	start := time.Now()
	// Longer than the pool's 500 ms read timeout.
	if _, err := c.Lock(context.Background(), "go:busy", Wait(800*time.Millisecond)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Lock with Wait: %v", err)
	}
	if d := time.Since(start); d < 750*time.Millisecond {
		t.Fatalf("the wait ended after %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(ctx, "go:busy"); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Lock with a deadline: %v", err)
	}
}

func TestCancelAbandonsWait(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:cancel")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.Lock(ctx, "go:cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the cancelled wait took %v", d)
	}
	// The proxy dropped the wait: nothing waits, and after the release
	// the lock is free (the abandoned wait did not take it).
	conn := c.Pool.Get()
	defer conn.Close()
	list, err := redis.Values(conn.Do("LOCK.LIST", "go:cancel"))
	if err != nil || len(list) != 1 {
		t.Fatalf("LOCK.LIST after the cancel: %v entries, %v", len(list), err)
	}
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}
	h2, err := c.TryLock(context.Background(), "go:cancel")
	if err != nil {
		t.Fatalf("TryLock after the cancelled wait: %v", err)
	}
	h2.Unlock()
}

func TestLeaseLost(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:lease", Lease(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := h.Check(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Check: %v", err)
	}
	if err := h.Unlock(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock: %v", err)
	}
}

func TestForceUnlockedIsLost(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:forced")
	if err != nil {
		t.Fatal(err)
	}
	conn := plainClient(t).Pool.Get()
	defer conn.Close()
	if n, err := redis.Int(conn.Do("FORCEUNLOCK", "go:forced")); n != 1 || err != nil {
		t.Fatalf("FORCEUNLOCK: %v %v", n, err)
	}
	if err := h.Unlock(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock: %v", err)
	}
	conn2 := c.Pool.Get()
	defer conn2.Close()
	_, err = conn2.Do("UNLOCK", "go:never")
	if !errors.Is(mapErr(err), ErrNotOwner) {
		t.Fatalf("UNLOCK of a free lock: %v", err)
	}
}

func TestKilledConnectionIsLost(t *testing.T) {
	c := plainClient(t)
	h, err := c.Lock(context.Background(), "go:killed")
	if err != nil {
		t.Fatal(err)
	}
	id, err := redis.Int64(h.conn.Do("CLIENT", "ID"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.kill(id); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock on a killed connection: %v", err)
	}
	h2, err := c.TryLock(context.Background(), "go:killed") // the proxy released it
	if err != nil {
		t.Fatal(err)
	}
	h2.Unlock()
}

func TestKinds(t *testing.T) {
	c := plainClient(t)
	bg := context.Background()
	a, err := c.Lock(bg, "go:fenced", Fenced())
	if err != nil || a.Token <= 0 {
		t.Fatalf("fenced: %v %v", a, err)
	}
	a.Unlock()
	b, err := c.Lock(bg, "go:fenced", Fenced())
	if err != nil || b.Token <= a.Token {
		t.Fatalf("fenced again: token %d after %d, %v", b.Token, a.Token, err)
	}
	b.Unlock()

	r1, err1 := c.RLock(bg, "go:rw")
	r2, err2 := c.RLock(bg, "go:rw")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := c.WLock(bg, "go:rw", Wait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("WLock under readers: %v", err)
	}
	r1.Unlock()
	r2.Unlock()
	w, err := c.WLock(bg, "go:rw", Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	w.Unlock()

	f, err := c.FairLock(bg, "go:fair")
	if err != nil {
		t.Fatal(err)
	}
	f.Unlock()

	sem := fmt.Sprintf("go:sem:%d", time.Now().UnixNano()) // new on every run
	if set, err := c.TrySetPermits(bg, sem, 2); !set || err != nil {
		t.Fatal(set, err)
	}
	p1, _ := c.Acquire(bg, sem, 1)
	p2, err := c.Acquire(bg, sem, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(bg, sem, 1, Wait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a third permit of 2: %v", err)
	}
	p1.Unlock()
	p2.Unlock()
	if _, err := c.Acquire(bg, "go:sem-unset", 1); !errors.Is(err, ErrNotInit) {
		t.Fatalf("unset semaphore: %v", err)
	}
}

func TestTLS(t *testing.T) {
	a := addr(t, "LP_TLS_PORT")
	ca, err := os.ReadFile(os.Getenv("LP_CA"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(os.Getenv("LP_CLIENT_CERT"), os.Getenv("LP_CLIENT_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"}
	c := New(newPool(t, func() (redis.Conn, error) {
		return redis.Dial("tcp", a, redis.DialUseTLS(true), redis.DialTLSConfig(cfg))
	}))
	hammer(t, c, []string{"go:tls:a", "go:tls:b"}, 4, 25)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := c.Lock(ctx, "go:tls:cancel")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Lock(ctx, "go:tls:cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled TLS wait: %v", err)
	}
	h.Unlock()
}

// TestUnix: a sidecar's clients on lockproxy --listen unix:///PATH, dialled
// with redigo's "unix" network; a wait longer than the read timeout too.
func TestUnix(t *testing.T) {
	path := os.Getenv("LP_UNIX")
	if path == "" {
		t.Skip("LP_UNIX is not set: run through tests/clients/run.sh lib-go")
	}
	c := New(newPool(t, func() (redis.Conn, error) {
		return redis.Dial("unix", path, redis.DialReadTimeout(500*time.Millisecond))
	}))
	hammer(t, c, []string{"go:unix:a", "go:unix:b"}, 4, 25)
	h, err := c.Lock(context.Background(), "go:unix:wait")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Longer than the pool's 500 ms read timeout, as over TCP.
	if _, err := c.Lock(context.Background(), "go:unix:wait", Wait(800*time.Millisecond)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Lock with Wait over the Unix socket: %v", err)
	}
	if d := time.Since(start); d < 750*time.Millisecond {
		t.Fatalf("the wait ended after %v", d)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}
}
