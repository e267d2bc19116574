//! Idle plugin modules unloaded by the module loader, with a real compiled component.

use std::time::Duration;

use crate::common::host::{component, scratch};
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine};
use reconcile_host::wasm::module::ModuleLoader;

fn loader(module_cache: Option<std::path::PathBuf>) -> ModuleLoader {
    ModuleLoader::new(
        PluginEngine::new(EngineSettings {
            pooling: false,
            module_cache,
        })
        .expect("engine"),
    )
}

#[tokio::test]
async fn only_a_module_idle_for_the_period_is_unloaded_and_only_once() {
    let dir = scratch("module-unload");
    let loader = loader(Some(dir.join("cache")));
    let module = loader.load(&component("noop")).await.expect("loads");
    assert!(module.is_loaded());
    assert_eq!(loader.counts(), (1, 0));

    assert_eq!(
        loader.unload_idle(Duration::from_secs(3600)),
        0,
        "used just now"
    );
    assert!(module.is_loaded());

    assert_eq!(loader.unload_idle(Duration::ZERO), 1);
    assert!(!module.is_loaded());
    assert_eq!(loader.counts(), (0, 1));
    assert_eq!(loader.unload_idle(Duration::ZERO), 0, "already unloaded");

    drop(module);
    assert_eq!(
        loader.counts(),
        (0, 0),
        "a module no plugin holds is not counted"
    );
}

#[tokio::test]
async fn without_a_module_cache_modules_stay_loaded() {
    let loader = loader(None);
    let module = loader.load(&component("noop")).await.expect("loads");
    assert_eq!(loader.unload_idle(Duration::ZERO), 0);
    assert!(module.is_loaded());
    assert_eq!(loader.counts(), (1, 0));
}
