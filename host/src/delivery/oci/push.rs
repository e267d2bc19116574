//! `reconcile-host push` (a component published in the CNCF wasm artifact layout, its digest
//! reference printed) and `reconcile-host pull` (a module fetched into the disk cache as the
//! host would, for scripts and tests).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use http::HeaderValue;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Reference, RegistryOperation};
use sha2::{Digest as _, Sha256};

use super::{
    CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE, MAX_MODULE_BYTES, OciError, Registry,
    cache::hex_encode,
};
use crate::config::HostConfig;
use crate::wasm::engine::{EngineSettings, PluginEngine};
use crate::wasm::module::{ModuleLoader, WIT_PACKAGE};

/// The registry settings shared by `push` and `pull`.
#[derive(Debug, Default, Args)]
pub struct RegistryArgs {
    /// The host's configuration file: its `oci:` section (insecure registries, CA files, docker
    /// config, cache directory) is used.
    #[arg(long, env = "RECONCILE_HOST_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A docker `config.json` with credentials (overrides `oci.dockerConfig`).
    #[arg(long, value_name = "FILE")]
    pub docker_config: Option<PathBuf>,
    /// Reach this reference's registry over plain HTTP (adds it to `oci.insecureRegistries`).
    #[arg(long)]
    pub insecure: bool,
}

/// Arguments of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component (`.wasm`) to publish.
    #[arg(value_name = "COMPONENT")]
    pub component: PathBuf,
    /// Where: `<registry>/<repository>:<tag>`.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// Directory for compiled plugin modules, as `check` and `run` use it (overrides the
    /// configuration's `moduleCache`), so a host or `check` on this machine finds the component
    /// compiled [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
    /// Registry settings.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// `<registry>/<repository>@sha256:…` or `<registry>/<repository>:<tag>`.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// Pull this digest instead of resolving the tag again.
    #[arg(long, value_name = "DIGEST")]
    pub pin: Option<String>,
    /// Where pulled modules are kept (overrides `oci.cacheDir`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Registry settings.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl RegistryArgs {
    /// The host configuration with these flags applied for `reference`'s registry.
    fn resolve(&self, reference: &str) -> anyhow::Result<HostConfig> {
        let mut config = match &self.config {
            Some(path) => HostConfig::load(path)?,
            None => HostConfig::default(),
        };
        if let Some(path) = &self.docker_config {
            config.oci.docker_config = Some(path.clone());
        }
        if self.insecure {
            let parsed = Reference::from_str(reference).with_context(|| {
                format!("`{reference}` is not a reference like <registry>/<repository>:<tag>")
            })?;
            config
                .oci
                .insecure_registries
                .push(parsed.resolve_registry().to_owned());
        }
        Ok(config)
    }
}

/// Runs `push`; prints the digest reference.
pub async fn push(args: PushArgs) -> ExitCode {
    match publish(&args).await {
        Ok(pushed) => {
            println!("{pushed}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `pull`; prints the digest, the layer digest, the path and whether it came from disk.
pub async fn pull(args: PullArgs) -> ExitCode {
    let started = Instant::now();
    let result = async {
        let config = args.registry.resolve(&args.reference)?;
        let dir = args
            .cache_dir
            .clone()
            .or_else(|| config.oci.cache_dir_beside(config.module_cache_dir()))
            .context("no directory for pulled modules: set `oci.cacheDir` or --cache-dir")?;
        let registry = Registry::new(&config.oci, dir)?;
        Ok::<_, anyhow::Error>(registry.pull(&args.reference, args.pin.as_deref()).await?)
    }
    .await;
    match result {
        Ok(pulled) => {
            println!("digest      {}", pulled.digest);
            println!("layer       {}", pulled.layer_digest);
            println!("path        {}", pulled.path.display());
            println!("from-cache  {}", pulled.from_cache);
            println!("elapsed-ms  {:.1}", started.elapsed().as_secs_f64() * 1e3);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `push` with its flags applied to the host configuration.
async fn publish(args: &PushArgs) -> anyhow::Result<String> {
    let mut config = args.registry.resolve(&args.reference)?;
    if let Some(dir) = &args.module_cache {
        config.module_cache = Some(dir.clone());
    }
    publish_component(&config, &args.component, &args.reference).await
}

/// Contacts the registry of `target` (`<registry>/<repository>:<tag>`) with `config`'s registry
/// settings, so that a wrong address, refused credentials or a plain-HTTP registry without
/// `--insecure` fail at once; then checks `component` (compiling it into `config`'s module
/// cache), builds the CNCF layout and pushes it; the digest reference.
///
/// # Errors
/// When the reference is not a tag reference, the component is not a reconciler or the
/// registry refuses it.
pub async fn publish_component(
    config: &HostConfig,
    component: &Path,
    target: &str,
) -> anyhow::Result<String> {
    let reference = Reference::from_str(target).with_context(|| {
        format!("`{target}` is not a reference like <registry>/<repository>:<tag>")
    })?;
    if reference.digest().is_some() {
        anyhow::bail!(
            "`{target}` names a digest; push to a tag (`<registry>/<repository>:<tag>`), the \
             digest is printed"
        );
    }
    let bytes = read_component(component)?;
    let oci = &config.oci;
    // The store is unused by a push; any directory will do.
    let registry = Registry::new(oci, std::env::temp_dir())?;
    let registry_name = reference.resolve_registry().to_owned();
    let auth = registry.credentials().for_registry(&registry_name);
    let client = registry.client().await?;
    let failed = |what, error| OciError::from_client(&registry_name, target, what, error);
    // The registry first: its answer takes a second, compiling a large component a minute.
    client
        .auth(&reference, &auth, RegistryOperation::Push)
        .await
        .map_err(|error| failed("push authorization", error))?;
    // A registry that takes Basic credentials says whether they are good only on a request for
    // the repository; the tag not being there yet is what a first push finds.
    if let Err(
        error @ (OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::RequestError(_)),
    ) = client.fetch_manifest_digest(&reference, &auth).await
    {
        return Err(failed("push authorization", error).into());
    }
    let (config_json, layer_digest) = component_config(component, &bytes, config).await?;
    let config_digest = format!("sha256:{}", hex_encode(Sha256::digest(&config_json)));
    let layer = OciDescriptor {
        media_type: CNCF_LAYER_MEDIA_TYPE.to_owned(),
        digest: layer_digest.clone(),
        size: i64::try_from(bytes.len())?,
        ..OciDescriptor::default()
    };
    let config_descriptor = OciDescriptor {
        media_type: CNCF_CONFIG_MEDIA_TYPE.to_owned(),
        digest: config_digest.clone(),
        size: i64::try_from(config_json.len())?,
        ..OciDescriptor::default()
    };
    client
        .push_blob(&reference, bytes, &layer_digest)
        .await
        .map_err(|error| failed("layer", error))?;
    client
        .push_blob(&reference, config_json, &config_digest)
        .await
        .map_err(|error| failed("config", error))?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
        config: config_descriptor,
        layers: vec![layer],
        ..OciImageManifest::default()
    };
    let body = serde_json::to_vec(&manifest)?;
    let digest = format!("sha256:{}", hex_encode(Sha256::digest(&body)));
    client
        .push_manifest_raw(
            &reference,
            body,
            HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
        )
        .await
        .map_err(|error| failed("manifest", error))?;
    Ok(format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    ))
}

/// The component's bytes, refused above [`MAX_MODULE_BYTES`].
fn read_component(path: &Path) -> anyhow::Result<Vec<u8>> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read component {}", path.display()))?
        .len();
    if size > MAX_MODULE_BYTES {
        anyhow::bail!(
            "component {} is {size} bytes, more than the {MAX_MODULE_BYTES} a host accepts",
            path.display()
        );
    }
    std::fs::read(path).with_context(|| format!("cannot read component {}", path.display()))
}

/// The CNCF config: the component's world, imports and exports, after checking it against the
/// `reconciler` world as the host will; with the layer's digest (the component's, taken once by
/// the loader).
async fn component_config(
    path: &Path,
    bytes: &[u8],
    config: &HostConfig,
) -> anyhow::Result<(Vec<u8>, String)> {
    let engine = PluginEngine::new(EngineSettings {
        pooling: false,
        module_cache: config.module_cache_dir(),
    })
    .or_else(|_| {
        PluginEngine::new(EngineSettings {
            pooling: false,
            module_cache: None,
        })
    })
    .context("cannot start the WebAssembly engine")?;
    let loader = ModuleLoader::new(engine.clone());
    let module = loader
        .load_bytes(path, bytes.to_vec())
        .await
        .with_context(|| {
            format!(
                "{} is not a reconciler component; not pushed",
                path.display()
            )
        })?;
    let mut imports: Vec<String> = module.imports().to_vec();
    imports.sort();
    let exports = module.exports();
    let layer_digest = format!("sha256:{}", module.digest());
    let created = std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_secs());
    let world = WIT_PACKAGE.replacen('@', "/reconciler@", 1);
    let json = serde_json::to_vec(&serde_json::json!({
        "created": rfc3339(created),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {
            "target": world,
            "imports": imports,
            "exports": exports,
        },
    }))?;
    Ok((json, layer_digest))
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn creation_times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_764_030_645), "2025-11-25T00:30:45Z");
    }
}
