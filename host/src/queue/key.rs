//! What a workqueue can hold.

/// What a workqueue can hold: any cheap-to-clone, hashable, thread-safe value, typically
/// `Arc<str>` or a small struct of namespace and name.
pub trait Key: Clone + Eq + std::hash::Hash + Send + Sync + 'static {}

impl<T: Clone + Eq + std::hash::Hash + Send + Sync + 'static> Key for T {}
