//! Finding the host replicas and asking each one a telemetry path: through the API server's
//! pod proxy, or directly (`--endpoint`).

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use secrecy::ExposeSecret;

use super::ReachArgs;
use crate::cluster_config::{ClusterSource, cluster_config};
use crate::telemetry::access::FORWARDED_AUTHORIZATION;

/// One replica's answer.
#[derive(Debug)]
pub struct Answer {
    /// The pod (or endpoint) asked.
    pub replica: String,
    /// The JSON it answered, or why there is none.
    pub body: Result<serde_json::Value, String>,
}

enum Route {
    /// Pods found by selector, reached through `pods/<pod>/proxy`.
    Proxy {
        client: kube::Client,
        namespace: String,
        selector: String,
        scheme: String,
        port: Option<u16>,
        /// The context's namespace, for objects named without one.
        default_namespace: String,
    },
    /// Telemetry URLs asked directly.
    Direct(Vec<String>),
}

/// How the replicas are reached, and with which token.
pub struct Reach {
    route: Route,
    token: Option<String>,
}

impl Reach {
    /// From the command's flags: the kubeconfig (unless `--endpoint` is given) and the token.
    pub async fn new(args: &ReachArgs) -> anyhow::Result<Self> {
        if !matches!(args.scheme.as_str(), "https" | "http") {
            anyhow::bail!("--scheme {:?}: give https or http", args.scheme);
        }
        if !args.endpoint.is_empty() {
            return Ok(Self {
                route: Route::Direct(args.endpoint.clone()),
                token: args.token.clone(),
            });
        }
        let source = ClusterSource {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            service_account_dir: None,
        };
        let found = cluster_config(&source)
            .await
            .map_err(|error| anyhow::anyhow!(crate::error_chain(&error)))?;
        let token = match &args.token {
            Some(token) => Some(token.clone()),
            None => kubeconfig_token(&found.config)?,
        };
        let default_namespace = found.namespace().unwrap_or("default").to_owned();
        let client = kube::Client::try_from(found.config)
            .context("cannot build a client for the kubeconfig")?;
        Ok(Self {
            route: Route::Proxy {
                client,
                namespace: args.host_namespace.clone(),
                selector: args.selector.clone(),
                scheme: args.scheme.clone(),
                port: args.port,
                default_namespace,
            },
            token,
        })
    }

    /// The namespace of objects named without one: the kubeconfig context's.
    pub fn default_namespace(&self) -> String {
        match &self.route {
            Route::Proxy {
                default_namespace, ..
            } => default_namespace.clone(),
            Route::Direct(_) => "default".to_owned(),
        }
    }

    /// Asks every replica `path` (with its query), one answer each, by replica name.
    pub async fn ask_all(&self, path: &str) -> anyhow::Result<Vec<Answer>> {
        self.ask_each(|_| path.to_owned()).await
    }

    /// Asks every replica the path `path_of` gives for its name (a pod's, or an endpoint URL).
    pub async fn ask_each(&self, path_of: impl Fn(&str) -> String) -> anyhow::Result<Vec<Answer>> {
        let mut answers = Vec::new();
        match &self.route {
            Route::Direct(endpoints) => {
                for endpoint in endpoints {
                    let body = self.ask_direct(endpoint, &path_of(endpoint)).await;
                    answers.push(Answer {
                        replica: endpoint.clone(),
                        body,
                    });
                }
            }
            Route::Proxy {
                client,
                namespace,
                selector,
                scheme,
                port,
                ..
            } => {
                let pods = Api::<Pod>::namespaced(client.clone(), namespace)
                    .list(&ListParams::default().labels(selector))
                    .await
                    .with_context(|| {
                        format!(
                            "cannot list the host pods ({selector}) in namespace {namespace}: \
                             you need `list pods` there (the Role reconcile-host-debug-proxy)"
                        )
                    })?;
                if pods.items.is_empty() {
                    anyhow::bail!(
                        "no host pods match {selector} in namespace {namespace}: give \
                         --host-namespace and --selector of your hosts"
                    );
                }
                let running = pods.items.iter().filter(|pod| {
                    pod.status
                        .as_ref()
                        .and_then(|status| status.pod_ip.as_deref())
                        .is_some_and(|ip| !ip.is_empty())
                });
                for pod in running {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let body = match port.or_else(|| metrics_port(pod)) {
                        Some(port) => {
                            let proxied = format!(
                                "/api/v1/namespaces/{namespace}/pods/{scheme}:{name}:{port}/proxy\
                                 {}",
                                path_of(&name)
                            );
                            self.ask_proxied(client, &proxied).await
                        }
                        None => Err(
                            "the pod has no container port named `metrics`: give --port \
                                     of the hosts' telemetry port"
                                .to_owned(),
                        ),
                    };
                    answers.push(Answer {
                        replica: name,
                        body,
                    });
                }
            }
        }
        Ok(answers)
    }

    async fn ask_proxied(
        &self,
        client: &kube::Client,
        path: &str,
    ) -> Result<serde_json::Value, String> {
        let mut request = http::Request::get(path);
        if let Some(token) = &self.token {
            request = request.header(FORWARDED_AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Vec::new())
            .map_err(|error| error.to_string())?;
        match client.request_text(request).await {
            Ok(text) => serde_json::from_str(&text).map_err(|error| {
                format!("the host answered something that is not JSON ({error}): {text:.200}")
            }),
            Err(kube::Error::Api(status)) => Err(refusal(status.code, status.message.trim())),
            Err(error) => Err(crate::error_chain(&error)),
        }
    }

    async fn ask_direct(&self, endpoint: &str, path: &str) -> Result<serde_json::Value, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("{}{path}", endpoint.trim_end_matches('/'));
        let mut request = reqwest::Client::new().get(&url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("cannot reach {url}: {}", crate::error_chain(&error)))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|error| error.to_string())?;
        if status != 200 {
            return Err(refusal(status, text.trim()));
        }
        serde_json::from_str(&text).map_err(|error| format!("not JSON ({error}): {text:.200}"))
    }
}

/// The pod's container port named `metrics` (the telemetry port of `deploy/`'s Deployment).
fn metrics_port(pod: &Pod) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .flat_map(|container| container.ports.iter().flatten())
        .find(|port| port.name.as_deref() == Some("metrics"))
        .and_then(|port| u16::try_from(port.container_port).ok())
}

/// What a refusal means for the reader.
fn refusal(code: u16, message: &str) -> String {
    let fix = match code {
        401 => {
            "; the host did not accept the token: give --token of an account bound to \
             the ClusterRole reconcile-host-debug-reader (why, top, logs) or \
             reconcile-host-recording-reader (replay)"
        }
        // The host's own refusal to serve recordings names its fix.
        403 if message.contains("recording.serve") => "",
        403 => {
            "; bind the ClusterRole reconcile-host-debug-reader (why, top, logs) or \
             reconcile-host-recording-reader (replay) — the host's check — and the Role \
             reconcile-host-debug-proxy (the API server's proxy) to the reader"
        }
        _ => "",
    };
    format!("{code}: {message}{fix}")
}

/// The token of the kubeconfig's user, if it has one (a token, or a token file).
fn kubeconfig_token(config: &kube::Config) -> anyhow::Result<Option<String>> {
    let auth = &config.auth_info;
    if let Some(token) = &auth.token {
        return Ok(Some(token.expose_secret().to_owned()));
    }
    match &auth.token_file {
        Some(file) => std::fs::read_to_string(file)
            .map(|token| Some(token.trim().to_owned()))
            .with_context(|| format!("cannot read the kubeconfig's token file {file}")),
        None => Ok(None),
    }
}
