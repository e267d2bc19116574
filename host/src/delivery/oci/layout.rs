//! The artifact layouts a pull accepts: the CNCF wasm artifact (config
//! `application/vnd.wasm.config.v0+json`, one `application/wasm` layer) and the older
//! wasm-to-oci layout.

use oci_client::manifest::{
    OciDescriptor, OciImageManifest, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};

use super::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE, short_str};

/// The one wasm layer of a manifest in the CNCF layout or the older wasm-to-oci layout.
pub(super) fn wasm_layer(body: &[u8]) -> Result<OciDescriptor, String> {
    let manifest: OciImageManifest = serde_json::from_slice(body)
        .map_err(|error| format!("its manifest does not parse: {error}"))?;
    let config = manifest.config.media_type.as_str();
    let layers: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|layer| {
            matches!(
                layer.media_type.as_str(),
                CNCF_LAYER_MEDIA_TYPE | WASM_LAYER_MEDIA_TYPE
            )
        })
        .collect();
    match layers.as_slice() {
        [layer] => Ok((*layer).clone()),
        [] => Err(format!(
            "config `{}`, layers {:?}: no `{CNCF_LAYER_MEDIA_TYPE}` or `{WASM_LAYER_MEDIA_TYPE}` \
             layer",
            short_str(config),
            manifest
                .layers
                .iter()
                .map(|layer| short_str(&layer.media_type))
                .collect::<Vec<_>>()
        )),
        more => Err(format!("{} wasm layers, not one", more.len())),
    }
    .and_then(|layer| {
        let known = [
            CNCF_CONFIG_MEDIA_TYPE,
            WASM_CONFIG_MEDIA_TYPE,
            "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.empty.v1+json",
        ];
        if known.contains(&config) {
            Ok(layer)
        } else {
            Err(format!("config media type `{}`", short_str(config)))
        }
    })
}

#[cfg(test)]
mod tests {
    use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;

    use super::*;

    fn manifest(config: &str, layer: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {"mediaType": config, "digest": format!("sha256:{}", "c".repeat(64)), "size": 2},
            "layers": [{"mediaType": layer, "digest": format!("sha256:{}", "d".repeat(64)), "size": 8}],
        }))
        .unwrap()
    }

    #[test]
    fn the_cncf_layout_and_the_older_wasm_layer_are_accepted() {
        assert!(wasm_layer(&manifest(CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE)).is_ok());
        assert!(wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE)).is_ok());
        let error = wasm_layer(&manifest(
            "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.image.layer.v1.tar+gzip",
        ))
        .unwrap_err();
        assert!(error.contains("no `application/wasm`"), "{error}");
    }
}
