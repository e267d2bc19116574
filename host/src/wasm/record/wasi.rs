//! A store's WASI clocks and random sources, session-aware: the host's own when no session
//! runs, kept in a recording, answered from a bundle in a replay.

use std::convert::Infallible;
use std::time::Duration;

use wasmtime_wasi::clocks::{monotonic_clock, wall_clock};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, Rng as _, WasiCtxBuilder};

use super::{Session, SessionSlot};

/// Installs session-aware clocks and random sources of `slot` in `builder`; the insecure seed is
/// `seed` (recorded by a fresh instance's recording, given by a replay).
pub fn install(builder: &mut WasiCtxBuilder, slot: &SessionSlot, seed: u128) {
    builder
        .wall_clock(Wall {
            inner: wall_clock(),
            slot: slot.clone(),
        })
        .monotonic_clock(Monotonic {
            inner: monotonic_clock(),
            slot: slot.clone(),
        })
        .secure_random(Random {
            inner: wasmtime_wasi::thread_rng(),
            slot: slot.clone(),
            insecure: false,
        })
        .insecure_random(Random {
            inner: wasmtime_wasi::thread_rng(),
            slot: slot.clone(),
            insecure: true,
        })
        .insecure_random_seed(seed);
}

struct Wall {
    inner: Box<dyn HostWallClock + Send>,
    slot: SessionSlot,
}

impl HostWallClock for Wall {
    fn resolution(&self) -> Duration {
        self.inner.resolution()
    }

    fn now(&self) -> Duration {
        match &mut *self.slot.lock() {
            None => self.inner.now(),
            Some(Session::Record(recording)) => {
                let now = self.inner.now();
                if recording.room(8) {
                    recording
                        .wall
                        .push(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX));
                }
                now
            }
            Some(Session::Replay(replaying)) => Duration::from_nanos(replaying.wall()),
        }
    }
}

struct Monotonic {
    inner: Box<dyn HostMonotonicClock + Send>,
    slot: SessionSlot,
}

impl HostMonotonicClock for Monotonic {
    fn resolution(&self) -> u64 {
        self.inner.resolution()
    }

    fn now(&self) -> u64 {
        match &mut *self.slot.lock() {
            None => self.inner.now(),
            Some(Session::Record(recording)) => {
                let now = self.inner.now();
                if recording.room(8) {
                    recording.monotonic.push(now);
                }
                now
            }
            Some(Session::Replay(replaying)) => replaying.monotonic(),
        }
    }
}

struct Random {
    inner: Box<dyn wasmtime_wasi::Rng + Send>,
    slot: SessionSlot,
    insecure: bool,
}

impl rand_core::TryRng for Random {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0; 4];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0; 8];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        match &mut *self.slot.lock() {
            None => self.inner.fill_bytes(dst),
            Some(Session::Record(recording)) => {
                self.inner.fill_bytes(dst);
                recording.bytes_read(self.insecure, dst);
            }
            Some(Session::Replay(replaying)) => replaying.fill(self.insecure, dst),
        }
        Ok(())
    }
}
