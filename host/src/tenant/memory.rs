//! A tenant's memory ceiling: the bytes of linear memory its instances hold together, charged
//! as each memory grows and given back when its instance is dropped.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes a tenant's instances may hold together, and how many they hold.
#[derive(Debug)]
pub struct MemoryBudget {
    ceiling: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `ceiling` bytes, none used.
    #[must_use]
    pub fn new(ceiling: u64) -> Self {
        Self {
            ceiling,
            used: AtomicU64::new(0),
        }
    }

    /// The ceiling in bytes.
    #[must_use]
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// Bytes held now.
    #[must_use]
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` when they fit under the ceiling; `false`, taking nothing, when not.
    pub fn try_charge(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes)
                    .filter(|total| *total <= self.ceiling)
            })
            .is_ok()
    }

    /// Gives back `bytes` taken by [`try_charge`](Self::try_charge).
    pub fn credit(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn charges_fit_under_the_ceiling_and_credits_make_room_again() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_charge(60));
        assert!(!budget.try_charge(41), "60 + 41 is past 100");
        assert_eq!(budget.used(), 60, "a refused charge takes nothing");
        assert!(budget.try_charge(40));
        budget.credit(60);
        assert_eq!(budget.used(), 40);
        assert!(budget.try_charge(60));
        assert!(!budget.try_charge(u64::MAX), "no overflow");
    }

    #[test]
    fn concurrent_charges_never_pass_the_ceiling() {
        let budget = Arc::new(MemoryBudget::new(1000));
        let granted: u64 = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    let budget = &budget;
                    scope.spawn(move || (0..100).filter(|_| budget.try_charge(7)).count() as u64)
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("joined")).sum()
        });
        assert_eq!(granted, 1000 / 7, "exactly as many charges as fit");
        assert_eq!(budget.used(), granted * 7);
    }
}
