//! Test guest: a component built against `wit/world.wit`, which names the package and world of
//! the guest ABI (`kube:reconcile@0.1.0`, `reconciler`) but exports
//! `reconcile: func(request: string) -> u32`. The host must refuse to load it.

#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "reconciler",
    });
}

struct WrongWorld;

impl bindings::Guest for WrongWorld {
    fn reconcile(request: String) -> u32 {
        u32::try_from(request.len()).unwrap_or(u32::MAX)
    }
}

#[allow(unsafe_code)]
mod export {
    use super::WrongWorld;

    crate::bindings::export!(WrongWorld with_types_in crate::bindings);
}
