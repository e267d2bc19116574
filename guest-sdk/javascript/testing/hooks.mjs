// Module resolution hooks for unit tests under Node: each of the host's imports
// (`kube:reconcile/<interface>@0.1.0`), which only a component has, resolves to the fake host's
// module of that interface here. Register them with `module.register` before importing the
// reconciler (see host.mjs).

const INTERFACES = new Set(['client', 'cache', 'events', 'log']);

export async function resolve(specifier, context, nextResolve) {
  const match = /^kube:reconcile\/([a-z-]+)@/.exec(specifier);
  if (match && INTERFACES.has(match[1])) {
    return { url: new URL(`./${match[1]}.mjs`, import.meta.url).href, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
