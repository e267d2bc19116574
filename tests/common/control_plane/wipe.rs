//! An API server that comes back without its state: etcd replaced by an empty one under the
//! same kube-apiserver address.

use super::{ATTEMPTS, ControlPlane, Watchdog, binaries, start_apiserver, start_etcd};

impl ControlPlane {
    /// Stops kube-apiserver and etcd, starts etcd on an empty data directory and kube-apiserver
    /// on the same address, certificates and tokens: what a wiped or replaced etcd looks like to
    /// clients (every uid new, resourceVersions starting again). The `default` ServiceAccount is
    /// made again; everything else the tests made is gone. Blocking, like
    /// [`start`](Self::start).
    ///
    /// # Panics
    /// When the new processes do not become ready; the message names the log to read.
    pub fn wipe_and_restart(&self) {
        let bin = binaries();
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("the server URL ends with its port");
        let mut processes = self.processes.lock();
        let mut watchdog: Watchdog = processes
            .watchdog
            .take()
            .expect("a control plane in use has its watchdog");
        watchdog.stop_group(&mut processes.apiserver);
        watchdog.stop_group(&mut processes.etcd);
        processes.wipes += 1;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let data = self
                .dir
                .join(format!("etcd-wiped-{}-{attempt}", processes.wipes));
            let (mut etcd, etcd_url) = match start_etcd(&bin, &self.dir, &data, &mut watchdog) {
                Ok(started) => started,
                Err(failure) if failure.port_clash => {
                    last = failure.message;
                    continue;
                }
                Err(failure) => panic!("{}", failure.message),
            };
            match start_apiserver(
                &bin,
                &self.dir,
                &etcd_url,
                &self.token,
                &mut watchdog,
                Some(port),
            ) {
                Ok((apiserver, _)) => {
                    processes.etcd = etcd;
                    processes.apiserver = apiserver;
                    processes.watchdog = Some(watchdog);
                    drop(processes);
                    self.create_default_service_account();
                    return;
                }
                Err(failure) => {
                    watchdog.stop_group(&mut etcd);
                    last = failure.message;
                }
            }
        }
        panic!("the control plane did not come back on port {port} in {ATTEMPTS} attempts: {last}");
    }
}
