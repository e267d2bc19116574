// Command peers runs one round of the workqueue workloads A–E through client-go's typed
// rate-limiting workqueue, and workload F through controller-runtime's controller, and prints
// one machine-readable `PEERS` line per workload. `host/benches/workqueue.rs` (PEERS_ROUND=1)
// prints the same lines for reconcile-host; `run.sh` alternates the two and tabulates.
// README.md in this directory defines the workloads and the producer yield policy.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

const (
	ops          = 1_000_000
	keyspace     = 10_000
	hotKeys      = 100
	workers      = 4
	yieldEvery   = 256
	delayed      = 100_000
	maxDelayUsec = 50_000
)

// keys are what a controller queues: namespace and name (controller-runtime's reconcile.Request
// is a types.NamespacedName).
func keys(n int) []types.NamespacedName {
	out := make([]types.NamespacedName, n)
	for i := range out {
		out[i] = types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("object-%05d", i)}
	}
	return out
}

func newQueue[T comparable]() workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: ""},
	)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// A: one goroutine, 1,000,000 × (add key i % 10,000, get, done).
func workloadA() {
	ks := keys(keyspace)
	q := newQueue[types.NamespacedName]()
	start := time.Now()
	for i := 0; i < ops; i++ {
		q.Add(ks[i%keyspace])
		k, _ := q.Get()
		q.Done(k)
	}
	elapsed := time.Since(start)
	q.ShutDown()
	fmt.Printf("PEERS A wall_ms=%.3f ops=%d\n", ms(elapsed), ops)
}

// B and C: one producer adds 1,000,000 keys (i % n), yielding every 256 adds; 4 workers get/done
// until the queue is shut down with drain after the last add.
func producerWorkers(label string, n int) {
	ks := keys(n)
	q := newQueue[types.NamespacedName]()
	var gets atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(k)
				gets.Add(1)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for i := 0; i < ops; i++ {
			q.Add(ks[i%n])
			if i%yieldEvery == yieldEvery-1 {
				runtime.Gosched()
			}
		}
		close(done)
	}()
	<-done
	q.ShutDownWithDrain()
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("PEERS %s wall_ms=%.3f gets=%d\n", label, ms(elapsed), gets.Load())
}

// D: 1,000,000 × (AddRateLimited + Forget), keys i % 10,000, the default controller limiter.
func workloadD() {
	ks := keys(keyspace)
	q := newQueue[types.NamespacedName]()
	start := time.Now()
	for i := 0; i < ops; i++ {
		k := ks[i%keyspace]
		q.AddRateLimited(k)
		q.Forget(k)
	}
	elapsed := time.Since(start)
	q.ShutDown()
	fmt.Printf("PEERS D wall_ms=%.3f ops=%d\n", ms(elapsed), ops)
}

// splitmix64: the delay sequence of E, identical on both sides.
type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// E: 100,000 AddAfter(i, random 0–50 ms), one worker; lateness = when the worker gets the key
// minus the ready time recorded just before the AddAfter call. Also the p99 of the keys due after
// the producer's last add (after_p99_ms) and their share (after_share).
func workloadE() {
	rng := splitmix{s: 7}
	delays := make([]time.Duration, delayed)
	for i := range delays {
		delays[i] = time.Duration(rng.next()%maxDelayUsec) * time.Microsecond
	}
	q := newQueue[int]()
	base := time.Now()
	due := make([]atomic.Int64, delayed)
	late := make([]time.Duration, 0, delayed)
	lateByKey := make([]time.Duration, delayed)
	finished := make(chan struct{})
	go func() {
		for len(late) < delayed {
			k, _ := q.Get()
			at := base.Add(time.Duration(due[k].Load()))
			l := max(time.Since(at), 0)
			late = append(late, l)
			lateByKey[k] = l
			q.Done(k)
		}
		close(finished)
	}()
	start := time.Now()
	for i, d := range delays {
		due[i].Store(int64(time.Since(base) + d))
		q.AddAfter(i, d)
	}
	produced := int64(time.Since(base))
	<-finished
	elapsed := time.Since(start)
	q.ShutDown()
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	var after []time.Duration
	for k := range lateByKey {
		if due[k].Load() >= produced {
			after = append(after, lateByKey[k])
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i] < after[j] })
	at := func(p float64) float64 { return ms(late[int(float64(len(late)-1)*p)]) }
	afterP99 := math.NaN() // only if the producer outlasted every delay (50 ms)
	if len(after) > 0 {
		afterP99 = ms(after[int(float64(len(after)-1)*0.99)])
	}
	fmt.Printf("PEERS E wall_ms=%.3f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f after_p99_ms=%.3f after_share=%.3f\n",
		ms(elapsed), at(0.5), at(0.99), at(1.0), afterP99, float64(len(after))/float64(delayed))
}

func main() {
	only := ""
	if len(os.Args) > 1 {
		only = os.Args[1]
	}
	for _, w := range []struct {
		name string
		run  func()
	}{
		{"A", workloadA},
		{"B", func() { producerWorkers("B", keyspace) }},
		{"C", func() { producerWorkers("C", hotKeys) }},
		{"D", workloadD},
		{"E", workloadE},
		{"F", workloadF},
	} {
		if only == "" || only == w.name {
			runtime.GC()
			w.run()
		}
	}
}
