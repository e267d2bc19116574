//! client-go's workqueue in three layers — basic, delaying, rate limiting — and its rate limiters.
//!
//! Behaviour follows SEMANTICS.md §1–§4 rule by rule; where a rule leaves a choice, the choice
//! is documented on the method. Every queue is a cheap clonable handle: clone it into each
//! producer and worker.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use reconcile_host::queue::{Completion, RateLimitingQueue};
//!
//! let queue = RateLimitingQueue::<String>::default();
//! queue.add("default/web".to_owned());
//! let key = queue.get().await.expect("queue is running");
//! // ... reconcile `key` ...
//! queue.complete(key, Completion::Done);
//! assert_eq!(queue.len(), 0);
//! # }
//! ```

mod basic;
mod delaying;
mod key;
mod layered_map;
mod limiter;
mod metrics;
mod precise;
mod rate_limiting;
mod state;

pub use basic::Queue;
pub use delaying::DelayingQueue;
pub use key::Key;
pub use limiter::{
    ControllerLimiter, FastSlow, ItemExponential, LimiterError, MaxOf, RateLimiter, TokenBucket,
    default_controller_limiter,
};
pub use metrics::{NoMetrics, QueueMetrics};
pub use rate_limiting::{Completion, RateLimitingQueue};
