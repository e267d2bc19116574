//! `kubectl reconcile`: a kubectl plugin that asks every host replica, through the API server's
//! proxy, why an object was reconciled (`why`), which plugins are busy (`top`), what a plugin
//! logged (`logs`), and re-runs a recorded reconcile here (`replay`).
//!
//! The host binary is the plugin: run as `kubectl-reconcile` (a link that
//! `reconcile-host kubectl install` makes) it behaves as `reconcile-host kubectl`. It finds the
//! replicas as pods (`--host-namespace`, `--selector`) and reads each one's
//! `/debug/reconciles` through `pods/<pod>/proxy`, so it needs no route to the pods, only the
//! API server's leave: `list pods` and `get pods/proxy` in the host's namespace (the Role
//! `reconcile-host-debug-proxy` of `deploy/`). The host checks the reader again (its telemetry
//! port is secured in a cluster): the token of the kubeconfig's user, or `--token`, rides in a
//! header the proxy passes on, and the API server must authorize it for `/debug/reconciles`
//! (the ClusterRole `reconcile-host-debug-reader`).

mod logs;
mod replay;
mod replicas;
mod show;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// What the plugin is called as.
pub const PLUGIN_NAME: &str = "kubectl-reconcile";

/// `reconcile-host kubectl` / `kubectl reconcile`.
#[derive(Debug, Args)]
pub struct KubectlArgs {
    #[command(subcommand)]
    command: KubectlCommand,
}

#[derive(Debug, Subcommand)]
enum KubectlCommand {
    /// The last reconciles of an object on every replica, newest first: when, why (the watch
    /// events, requeues, retries, handovers and swaps that queued it), how long, how it ended,
    /// and the API calls it made.
    Why(WhyArgs),
    /// The plugins of every replica by reconcile time, with errors and queue depth.
    Top(ReachArgs),
    /// A plugin's latest log lines from every replica, merged by time: its guest's output and
    /// `log` calls, and the host's lines about its reconciles.
    Logs(logs::LogsArgs),
    /// Fetch a plugin's newest recorded reconcile (of an object) from the replicas and re-run
    /// it here with a component, no cluster needed; exits 1 when the replay differs.
    Replay(replay::ReplayArgs),
    /// Make `kubectl reconcile` work: link `kubectl-reconcile` to this binary in `DIR`
    /// [default: the directory of this binary], which must be on PATH.
    Install {
        /// Where to put the link.
        dir: Option<PathBuf>,
    },
}

/// `why <kind>/<name>`.
#[derive(Debug, Args)]
struct WhyArgs {
    /// The object: `<kind>/<name>` (`configmap/settings`, `deployment.apps/web`).
    object: String,
    /// The object's namespace [default: the kubeconfig context's]; ignored for cluster-scoped
    /// kinds with `--cluster-scoped`.
    #[arg(short, long)]
    namespace: Option<String>,
    /// The object is cluster-scoped.
    #[arg(long)]
    cluster_scoped: bool,
    /// Print the replicas' answers as JSON.
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
    #[command(flatten)]
    reach: ReachArgs,
}

/// How to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// How the replicas are found and reached.
#[derive(Debug, Args)]
pub struct ReachArgs {
    /// Kubeconfig to use [default: $KUBECONFIG, then ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context [default: the current context].
    #[arg(long)]
    context: Option<String>,
    /// The namespace the hosts run in.
    #[arg(long, default_value = "reconcile-system")]
    host_namespace: String,
    /// The label selector of the hosts' pods.
    #[arg(long, default_value = "app.kubernetes.io/name=reconcile-host")]
    selector: String,
    /// The hosts' telemetry port [default: each pod's container port named `metrics`].
    #[arg(long)]
    port: Option<u16>,
    /// `https` (the hosts' telemetry is secured: in a cluster) or `http`
    /// (`telemetry.authorization: none`).
    #[arg(long, default_value = "https")]
    scheme: String,
    /// The bearer token the hosts check [default: the kubeconfig user's token]. A user who
    /// signs in with a client certificate has none: give one of an account bound to
    /// `reconcile-host-debug-reader`, e.g. `--token "$(kubectl create token <account>)"`.
    #[arg(long, env = "KUBECTL_RECONCILE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Ask this host telemetry URL directly instead of the pods through the API server (a
    /// host's loopback port in `dev`); repeatable.
    #[arg(long, value_name = "URL")]
    endpoint: Vec<String>,
}

/// Runs `reconcile-host kubectl …`: 0 when every replica answered, 1 when one did not (its
/// error printed), 2 on bad input.
pub async fn kubectl(args: KubectlArgs) -> ExitCode {
    let result = match args.command {
        KubectlCommand::Install { dir } => return install(dir),
        KubectlCommand::Why(args) => why(args).await,
        KubectlCommand::Top(reach) => top(reach).await,
        KubectlCommand::Logs(args) => logs::logs(args).await,
        KubectlCommand::Replay(args) => replay::replay(args).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn why(args: WhyArgs) -> anyhow::Result<ExitCode> {
    let Some((kind, name)) = args
        .object
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        anyhow::bail!(
            "{:?} is not an object: give <kind>/<name>, e.g. configmap/settings",
            args.object
        );
    };
    let reach = replicas::Reach::new(&args.reach).await?;
    let namespace = if args.cluster_scoped {
        None
    } else {
        Some(
            args.namespace
                .clone()
                .unwrap_or_else(|| reach.default_namespace()),
        )
    };
    let path = format!(
        "/debug/reconciles/{}/{name}?kind={kind}",
        namespace.as_deref().unwrap_or("_")
    );
    let answers = reach.ask_all(&path).await?;
    let failed = answers.iter().any(|answer| answer.body.is_err());
    match args.output {
        Output::Json => println!("{}", show::answers_json(&answers)),
        Output::Text => print!("{}", show::why(&answers, kind, namespace.as_deref(), name)),
    }
    Ok(exit(failed))
}

async fn top(reach: ReachArgs) -> anyhow::Result<ExitCode> {
    let reach = replicas::Reach::new(&reach).await?;
    let answers = reach.ask_all("/debug/reconciles").await?;
    print!("{}", show::top(&answers));
    Ok(exit(answers.iter().any(|answer| answer.body.is_err())))
}

fn exit(failed: bool) -> ExitCode {
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Links `kubectl-reconcile` in `dir` to this binary.
fn install(dir: Option<PathBuf>) -> ExitCode {
    let result = (|| -> anyhow::Result<PathBuf> {
        let binary = std::env::current_exe()?.canonicalize()?;
        let dir = match dir {
            Some(dir) => dir,
            None => binary
                .parent()
                .map(PathBuf::from)
                .ok_or_else(|| anyhow::anyhow!("this binary has no directory"))?,
        };
        let link = dir.join(PLUGIN_NAME);
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)
                .map_err(|error| anyhow::anyhow!("cannot replace {}: {error}", link.display()))?;
        }
        std::os::unix::fs::symlink(&binary, &link)
            .map_err(|error| anyhow::anyhow!("cannot link {}: {error}", link.display()))?;
        Ok(link)
    })();
    match result {
        Ok(link) => {
            println!(
                "{} → this binary; `kubectl reconcile why <kind>/<name>` works while its \
                 directory is on PATH",
                link.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}; give a directory you may write that is on PATH");
            ExitCode::from(2)
        }
    }
}
