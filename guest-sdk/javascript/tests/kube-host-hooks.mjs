// Module resolution hooks for the SDK's tests under Node: the host's imports
// (`kube:reconcile/<interface>@0.1.0`), which only a component has, resolve to the fake host of
// fake-host.mjs. Registered by the tests with `module.register` before they import the SDK.

const fakeHost = new URL('./fake-host.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith('kube:reconcile/')) {
    return { url: fakeHost, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
