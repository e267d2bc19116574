//! A TCP proxy between one replica slot and the API server that the fault schedule turns rough:
//! it delays each chunk by a random time (so requests on different connections overtake each
//! other), stalls every connection, cuts them all, or holds new connections before their TLS
//! handshake (so requests waiting for a connection wait inside the replica, none on the wire).
//! TLS passes through untouched.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::schedule::Rng;

/// What the proxy does to the bytes it forwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mode {
    /// Each chunk waits a random time up to this long.
    max_delay: Duration,
    /// Nothing is forwarded while set.
    stalled: bool,
    /// Incremented to close every open connection.
    cuts: u64,
    /// New connections reach the API server only once this is unset (their handshake waits).
    held: bool,
}

/// The proxy; it stops when dropped.
pub struct Proxy {
    address: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free local port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr, seed: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let address = listener.local_addr().expect("proxy address");
        let mode = Arc::new(watch::Sender::new(Mode::default()));
        let sender = Arc::clone(&mode);
        let task = tokio::spawn(async move {
            let mut connections = Rng::new(seed);
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let seed = connections.next();
                let mut mode = sender.subscribe();
                tokio::spawn(async move {
                    let cuts = mode.borrow().cuts;
                    match mode.wait_for(|m| !m.held || m.cuts != cuts).await {
                        Ok(now) if now.cuts == cuts => {}
                        _ => return,
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = pump(client_read, server_write, mode.clone(), Rng::new(seed));
                    let down = pump(server_read, client_write, mode, Rng::new(!seed));
                    tokio::join!(up, down);
                });
            }
        });
        Self {
            address,
            mode,
            task,
        }
    }

    /// Where the replicas connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Delays every chunk by a random time up to `max` (zero: forward at once).
    pub fn delay(&self, max: Duration) {
        self.mode.send_modify(|mode| mode.max_delay = max);
    }

    /// Stops (`true`) or resumes forwarding on every connection.
    pub fn stall(&self, stalled: bool) {
        self.mode.send_modify(|mode| mode.stalled = stalled);
    }

    /// Closes every open connection.
    pub fn cut(&self) {
        self.mode.send_modify(|mode| mode.cuts += 1);
    }

    /// Holds (`true`) new connections before they reach the API server, or lets them through.
    /// Only a handshake waits: a request cannot be sent on a connection not yet set up.
    pub fn hold(&self, held: bool) {
        self.mode.send_modify(|mode| mode.held = held);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// Copies `from` to `to` under `mode` until either side closes or a cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    mut rng: Rng,
) {
    let cuts = mode.borrow().cuts;
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            _ = mode.wait_for(|m| m.cuts != cuts) => return,
        };
        let Ok(count) = read else { return };
        if count == 0 {
            let _ = to.shutdown().await;
            return;
        }
        let current = *mode.borrow();
        if current.stalled
            && mode
                .wait_for(|m| !m.stalled || m.cuts != cuts)
                .await
                .is_err()
        {
            return;
        }
        let max = mode.borrow().max_delay;
        if !max.is_zero() {
            let wait = Duration::from_micros(rng.below(max.as_micros() as u64 + 1));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = mode.wait_for(|m| m.cuts != cuts) => return,
            }
        }
        if mode.borrow().cuts != cuts || to.write_all(&buffer[..count]).await.is_err() {
            return;
        }
    }
}
