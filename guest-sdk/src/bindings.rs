//! The bindings `wit-bindgen` generates from `wit/` for the `reconciler` world.
#![allow(unsafe_code, missing_docs, clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "../wit",
    world: "reconciler",
    additional_derives: [PartialEq, Eq, Hash],
    pub_export_macro: true,
    default_bindings_module: "reconcile_guest::bindings",
});
