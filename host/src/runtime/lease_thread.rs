//! The thread Lease work runs on: the elector or the sharding member gets a single-threaded
//! tokio runtime of its own, so renewals never wait for a worker busy with reconciles.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use crate::client::{ClientError, ClientLimits};

/// The client Lease work talks through.
pub(super) enum LeaseClient {
    /// Built already, on another runtime: its request buffer runs there.
    Built(kube::Client),
    /// Built on the Lease thread, with its own rate limit and connections.
    Config(Box<kube::Config>, ClientLimits),
}

impl LeaseClient {
    /// The client; call it on the Lease thread.
    pub(super) fn build(self) -> Result<kube::Client, ClientError> {
        match self {
            Self::Built(client) => Ok(client),
            Self::Config(config, limits) => crate::client::client(*config, &limits),
        }
    }
}

/// Lease work running on its own thread; resolves to its output (`None` if it panicked).
/// Dropping it drops the work at once, without the release that a cancelled shutdown token
/// would let it do: for a replica that is being killed.
pub(super) struct LeaseThread<T> {
    done: Option<oneshot::Receiver<T>>,
    _abort: oneshot::Sender<()>,
}

/// Starts `work` on a new thread named `name`, in a single-threaded runtime of its own. The
/// future is built inside that runtime: clients it builds spawn their tasks (request buffers,
/// connections) there too.
pub(super) fn spawn<F, Fut>(name: &str, work: F) -> std::io::Result<LeaseThread<Fut::Output>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let (done_tx, done) = oneshot::channel();
    let (abort, aborted) = oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let work = work();
                tokio::select! {
                    biased;
                    _ = aborted => {}
                    output = work => {
                        let _ = done_tx.send(output);
                    }
                }
            });
        })?;
    Ok(LeaseThread {
        done: Some(done),
        _abort: abort,
    })
}

impl<T> LeaseThread<T> {
    /// Whether the work has ended and its output was taken.
    pub(super) fn is_finished(&self) -> bool {
        self.done.is_none()
    }
}

impl<T> Future for LeaseThread<T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let Some(done) = self.done.as_mut() else {
            return Poll::Ready(None);
        };
        let output = std::task::ready!(Pin::new(done).poll(cx));
        self.done = None;
        Poll::Ready(output.ok())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;

    /// Blocks the calling worker thread until `ticks` reaches `goal` or a minute passes;
    /// returns the ticks seen.
    fn block_until(ticks: &AtomicU64, goal: u64) -> u64 {
        let start = std::time::Instant::now();
        while ticks.load(Ordering::Relaxed) < goal && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        ticks.load(Ordering::Relaxed)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn lease_work_goes_on_while_the_main_runtime_is_blocked() {
        let ticks = Arc::new(AtomicU64::new(0));
        let stop = tokio_util::sync::CancellationToken::new();
        let ticker = {
            let (ticks, stop) = (Arc::clone(&ticks), stop.clone());
            // Like a client built inside: the task it spawns runs on the lease thread.
            spawn("lease-test", move || async move {
                let task = tokio::spawn(async move {
                    let mut interval = tokio::time::interval(Duration::from_millis(10));
                    while !stop.is_cancelled() {
                        interval.tick().await;
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                });
                task.await.is_ok()
            })
            .expect("lease thread")
        };
        // The main runtime's only worker is busy (a reconcile that does not yield).
        let seen = {
            let ticks = Arc::clone(&ticks);
            tokio::spawn(async move { block_until(&ticks, 20) })
                .await
                .expect("blocker")
        };
        assert!(
            seen >= 20,
            "{seen} ticks while the main runtime was blocked"
        );
        stop.cancel();
        assert_eq!(ticker.await, Some(true));
    }

    #[tokio::test]
    async fn dropping_the_handle_ends_the_work() {
        let (dropped_tx, dropped) = oneshot::channel::<()>();
        let thread = spawn("lease-test", move || async move {
            let _guard = dropped_tx;
            std::future::pending::<()>().await;
        })
        .expect("lease thread");
        assert!(!thread.is_finished());
        drop(thread);
        tokio::time::timeout(Duration::from_secs(60), dropped)
            .await
            .expect("the work was dropped")
            .expect_err("dropped, not sent");
    }
}
