//! The randomized fault checker (docs/testing.md): replicas of the real host reconcile witness
//! objects while a writer changes them and a seeded schedule injects faults (freezes, kills,
//! graceful leaves, joins, API server freezes, rough connections, CPU contention); an observer
//! records the server's history and [`checker`] judges it, and every object's last change must
//! be reconciled within a bound once the faults stop; in sharded mode a [`storm`] of lapses
//! follows, during which every object must be reconciled too.

pub mod checker;
pub mod observer;
pub mod proxy;
pub mod replicas;
pub mod ring;
pub mod run;
pub mod schedule;
pub mod storm;
mod world;
