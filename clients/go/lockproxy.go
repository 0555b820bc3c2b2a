// Package lockproxy takes locks, read-write locks, fair locks, fenced locks
// and semaphore permits through lockproxy, on redigo.
//
// Design: a hold pins one pooled connection. lockproxy binds a lock to the
// connection that took it (its owner, the watchdog that renews it, the
// release when the connection closes, the lease-lost push), while a
// redis.Pool hands each Get any idle connection. So every acquire takes
// one connection from the pool, sends the acquire on it, keeps it for the
// life of the hold, sends the release on it, and only then puts it back. A
// Client (and its pool) may be shared by any number of goroutines; each
// concurrent hold or wait uses one pooled connection. A Hold belongs to
// the goroutine that took it.
//
// Waits follow a context.Context. Its deadline becomes the command's WAIT;
// when it is cancelled (or its deadline passes) during the wait, the
// client asks the proxy to kill the waiting connection (CLIENT KILL ID,
// sent on another pooled connection; the id was read with the acquire,
// pipelined, so it costs no round trip). The proxy drops the pending
// acquire when a connection closes, and releases it if it had just been
// granted, so an abandoned wait never leaves a lock behind.
package lockproxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Version of this client library.
const Version = "0.1.0"

// Errors the proxy answers, matched with errors.Is.
var (
	// ErrLockLost: the lease was lost (it expired, or the lock was taken
	// over) before the release; the work done under it was not protected.
	ErrLockLost = errors.New("LOCKLOST")
	// ErrNotOwner: the release came from a connection that does not hold it.
	ErrNotOwner = errors.New("NOTOWNER")
	// ErrNotInit: the semaphore was never set (TrySetPermits).
	ErrNotInit = errors.New("NOTINIT")
	// ErrUpstream: Redis is down or slow; nothing was granted.
	ErrUpstream = errors.New("UPSTREAM")
	// ErrNotAcquired: the wait ran out (or TryLock found it taken).
	ErrNotAcquired = errors.New("lockproxy: not acquired: the wait ran out")
)

var codes = map[string]error{
	"LOCKLOST": ErrLockLost, "NOTOWNER": ErrNotOwner, "NOTINIT": ErrNotInit,
	"UPSTREAM": ErrUpstream,
}

// Error is an error reply of the proxy; errors.Is matches it against the
// Err* values above by its code (the reply's first word).
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is the sentinel for this reply's code.
func (e *Error) Is(target error) bool { return codes[e.Code] == target && target != nil }

func mapErr(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		msg := string(re)
		code, _, _ := strings.Cut(msg, " ")
		return &Error{Code: code, Msg: msg}
	}
	return err
}

// waitEnded is the error of a wait ended by its context: it matches both
// ErrNotAcquired and the context's error (errors.Is).
type waitEnded struct{ cause error }

func (e waitEnded) Error() string        { return ErrNotAcquired.Error() + ": " + e.cause.Error() }
func (e waitEnded) Is(target error) bool { return target == ErrNotAcquired || target == e.cause }
func (e waitEnded) Unwrap() error        { return e.cause }

// deadlineGrace: when the context's deadline (which is also the WAIT)
// passes, the proxy's own answer is awaited this long before the wait is
// killed, so a plain timeout costs no connection.
const deadlineGrace = 250 * time.Millisecond

// waitSlack is how much longer than WAIT a waiting read may take before
// the connection is treated as dead (the proxy answers nil when WAIT ends).
const waitSlack = 10 * time.Second

// killTimeout bounds getting a connection to send CLIENT KILL on.
const killTimeout = 5 * time.Second

// Client takes holds through a pool of connections to lockproxy.
type Client struct {
	Pool *redis.Pool
}

// New returns a Client over pool (which it does not own).
func New(pool *redis.Pool) *Client { return &Client{Pool: pool} }

// Option changes one acquire.
type Option func(*options)

type options struct {
	lease   time.Duration
	wait    time.Duration
	hasWait bool
	fenced  bool
}

// Lease makes the lock expire after d unless released (no watchdog).
func Lease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// Wait bounds the wait to d (the context may end it sooner).
func Wait(d time.Duration) Option { return func(o *options) { o.wait, o.hasWait = d, true } }

// Fenced takes a fencing token with the lock (Hold.Token).
func Fenced() Option { return func(o *options) { o.fenced = true } }

// Hold is one granted hold on one pinned connection.
type Hold struct {
	conn    redis.Conn
	release string
	name    string
	permits int
	// Token is the fencing token of a Fenced lock, else 0.
	Token int64
}

type kind struct{ acquire, release string }

var (
	plainLock = kind{"LOCK", "UNLOCK"}
	fairLock  = kind{"FAIRLOCK", "FAIRUNLOCK"}
	readLock  = kind{"RLOCK", "RUNLOCK"}
	writeLock = kind{"WLOCK", "WUNLOCK"}
	semaphore = kind{"SEM.ACQUIRE", "SEM.RELEASE"}
)

// Lock takes the lock name, waiting until it is granted, the Wait option
// runs out (ErrNotAcquired), or ctx ends (an error matching both
// ErrNotAcquired and ctx.Err()).
func (c *Client) Lock(ctx context.Context, name string, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, plainLock, name, 0, opts)
}

// TryLock makes one attempt: ErrNotAcquired when the lock is taken.
func (c *Client) TryLock(ctx context.Context, name string, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, plainLock, name, 0, append(opts, Wait(0)))
}

// FairLock takes a fair lock (granted in arrival order).
func (c *Client) FairLock(ctx context.Context, name string, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, fairLock, name, 0, opts)
}

// RLock takes the read lock of a read-write lock.
func (c *Client) RLock(ctx context.Context, name string, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, readLock, name, 0, opts)
}

// WLock takes the write lock of a read-write lock.
func (c *Client) WLock(ctx context.Context, name string, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, writeLock, name, 0, opts)
}

// Acquire takes n permits of a semaphore; they go back on Unlock, or when
// the pinned connection closes.
func (c *Client) Acquire(ctx context.Context, name string, n int, opts ...Option) (*Hold, error) {
	return c.acquire(ctx, semaphore, name, n, opts)
}

// TrySetPermits creates the semaphore with n permits if it is not set.
func (c *Client) TrySetPermits(ctx context.Context, name string, n int) (bool, error) {
	conn, err := c.Pool.GetContext(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	set, err := redis.Bool(conn.Do("SEM.TRYSETPERMITS", name, n))
	return set, mapErr(err)
}

func (k kind) args(name string, permits int, o *options) []interface{} {
	args := []interface{}{name}
	if k == semaphore {
		args = append(args, permits)
	}
	if o.lease > 0 {
		args = append(args, "LEASE", o.lease.Milliseconds())
	}
	if o.hasWait {
		args = append(args, "WAIT", o.wait.Milliseconds())
	}
	if o.fenced {
		args = append(args, "FENCED")
	}
	return args
}

type reply struct {
	v   interface{}
	err error
}

func (c *Client) acquire(ctx context.Context, k kind, name string, permits int,
	opts []Option) (*Hold, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left < 0 {
			left = 0
		}
		if !o.hasWait || left < o.wait {
			o.wait, o.hasWait = left, true
		}
	}
	conn, err := c.Pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	readTimeout := time.Duration(0) // none: wait until granted
	if o.hasWait {
		readTimeout = o.wait + waitSlack
	}
	cancellable := ctx.Done() != nil && (!o.hasWait || o.wait > 0)
	giveBack := []interface{}{name}
	if k == semaphore {
		giveBack = append(giveBack, permits)
	}
	v, err := c.send(ctx, conn, cancellable, readTimeout, k.acquire, k.args(name, permits, &o),
		k.release, giveBack)
	if err != nil {
		conn.Close()
		return nil, mapErr(err)
	}
	if v == nil {
		conn.Close()
		return nil, ErrNotAcquired
	}
	h := &Hold{conn: conn, release: k.release, name: name, permits: permits}
	if tok, ok := v.(int64); ok {
		h.Token = tok
	}
	return h, nil
}

// send sends cmd on conn and reads its reply. When cancellable, the
// connection's CLIENT ID goes out first in the same flush, and a ctx that
// ends during the wait kills the connection (see the package doc).
func (c *Client) send(ctx context.Context, conn redis.Conn, cancellable bool,
	readTimeout time.Duration, cmd string, args []interface{},
	release string, releaseArgs []interface{}) (interface{}, error) {
	if !cancellable {
		return redis.DoWithTimeout(conn, readTimeout, cmd, args...)
	}
	if err := conn.Send("CLIENT", "ID"); err != nil {
		return nil, err
	}
	if err := conn.Send(cmd, args...); err != nil {
		return nil, err
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	id, err := redis.Int64(redis.ReceiveWithTimeout(conn, readTimeout))
	if err != nil {
		return nil, err
	}
	done := make(chan reply, 1)
	go func() {
		v, err := redis.ReceiveWithTimeout(conn, readTimeout)
		done <- reply{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		select {
		case r := <-done:
			return r.v, r.err
		case <-time.After(deadlineGrace):
		}
	}
	if kerr := c.kill(id); kerr != nil {
		// No connection to kill it with: wait for the answer, and give
		// back a grant that came too late.
		r := <-done
		if r.err == nil && r.v != nil {
			_, _ = conn.Do(release, releaseArgs...)
		}
		return nil, waitEnded{ctx.Err()}
	}
	<-done // the killed connection's read ends at once
	return nil, waitEnded{ctx.Err()}
}

func (c *Client) kill(id int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	k, err := c.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer k.Close()
	_, err = k.Do("CLIENT", "KILL", "ID", id)
	return err
}

// Name is the name the hold is on.
func (h *Hold) Name() string { return h.name }

// Unlock releases the hold and puts the connection back in the pool.
// ErrLockLost (errors.Is) when the lease was lost first.
func (h *Hold) Unlock() error {
	if h.conn == nil {
		return errors.New("lockproxy: Unlock of a hold already released")
	}
	conn := h.conn
	h.conn = nil
	defer conn.Close()
	var err error
	if h.release == semaphore.release {
		_, err = conn.Do(h.release, h.name, h.permits)
	} else {
		_, err = conn.Do(h.release, h.name)
	}
	var re redis.Error
	if err != nil && !errors.As(err, &re) {
		// The connection failed, and with it the hold (the proxy releases
		// what a closed connection held), maybe before the work ended.
		return &Error{Code: "LOCKLOST", Msg: fmt.Sprintf("LOCKLOST %s: the hold's connection "+
			"failed (%v); the proxy released the lock when it closed", h.name, err)}
	}
	return mapErr(err)
}

// Info is LOCK.INFO for this hold's connection (locked, hold_count,
// ttl_ms, owner, watchdog, token).
func (h *Hold) Info() (map[string]interface{}, error) {
	if h.conn == nil {
		return nil, errors.New("lockproxy: Info of a hold already released")
	}
	vs, err := redis.Values(h.conn.Do("LOCK.INFO", h.name))
	if err != nil {
		return nil, mapErr(err)
	}
	m := make(map[string]interface{}, len(vs)/2)
	for i := 0; i+1 < len(vs); i += 2 {
		key, _ := redis.String(vs[i], nil)
		if b, ok := vs[i+1].([]byte); ok {
			m[key] = string(b)
		} else {
			m[key] = vs[i+1]
		}
	}
	return m, nil
}

// Check returns an error matching ErrLockLost if Redis no longer records
// this hold (its lease ran out, or it was force-unlocked). redigo speaks
// RESP2, which cannot carry the proxy's lease-lost push; this is the way
// to ask, e.g. before committing work done under the lock.
func (h *Hold) Check() error {
	info, err := h.Info()
	if err != nil {
		return err
	}
	if n, _ := info["hold_count"].(int64); n == 0 {
		return &Error{Code: "LOCKLOST", Msg: fmt.Sprintf("LOCKLOST %s: no longer held", h.name)}
	}
	return nil
}
