//! Sharded mode: every replica dispatches its share of the keys, placed by consistent hashing
//! of (plugin, key) over the live members, each holding a membership Lease of its own. A key
//! changes hands only after its previous owner has stopped dispatching it (the protocol in
//! `view`, told in docs/sharding.md), and a replica whose Lease lapsed dispatches and writes
//! nothing (its [`Fence`](crate::election::Fence)).

mod gate;
mod member;
mod ring;
#[cfg(test)]
mod tests;
mod view;

pub use gate::{Admission, Gate, Placement, Ticket};

pub use member::{ACK_ANNOTATION, MemberSettings, OnChange, RING_LABEL, Sharding, ring_selector};
pub use ring::{Ring, VIRTUAL_NODES, ViewId};
pub use view::{Assignment, Membership, Observed, Step};
