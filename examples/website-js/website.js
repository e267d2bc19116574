// Example reconciler in JavaScript: turns each `Website` (`js.example.com/v1`, the CRD in
// samples/crd.yaml) into a Deployment and a Service of the same name, owned by the Website so
// they are garbage collected with it, and reports what it applied in the Website's status.
// The JavaScript port of examples/website (Rust): same children, same status, same recheck.
//
// Built to a component against wit/reconcile.wit by build.sh. The host's imports are ES modules
// named after their WIT interfaces; a function whose WIT result is `result<T, call-error>`
// returns T or throws an Error whose `payload` is the call-error ({tag, val}).

import * as cache from 'kube:reconcile/cache@0.1.0';
import * as client from 'kube:reconcile/client@0.1.0';
import * as log from 'kube:reconcile/log@0.1.0';

/**
 * The Website's API version and kind. The reconciler writes the apiVersion of the Website it
 * read, so the same component serves the CRD installed under another group (manifest `for`).
 */
const API_VERSION = 'js.example.com/v1';
const KIND = 'Website';
/** The label on the Deployment, its pods and the Service. */
const NAME_LABEL = 'app.kubernetes.io/name';
/** How often to look again without a change, in milliseconds. */
const RECHECK_MS = 60_000;

/**
 * The export: brings the world in line with `request.object` and says when to look again.
 * Returns an action ({tag: 'done'} | {tag: 'requeue'} | {tag: 'requeue-after', val: ms}); a
 * thrown `{message}` is the WIT `err(reconcile-error)`, retried by the host with backoff.
 */
export function reconcile(request) {
  try {
    return reconcileWebsite(request);
  } catch (error) {
    // A plain object: both engines turn it into `reconcile-error`. (QuickJS traps on a thrown
    // Error instance, SpiderMonkey on a thrown string.)
    throw { message: messageOf(error) };
  }
}

function reconcileWebsite(request) {
  // `option<string>`: undefined (SpiderMonkey) or null (QuickJS) when the object is gone.
  if (request.object == null) {
    // Deleted: the Deployment and Service go by garbage collection (ownerReferences).
    return { tag: 'done' };
  }
  const website = parse(request.object, 'the Website');
  const { name, namespace } = request.target;
  if (namespace == null) {
    throw new Error('a Website is namespaced');
  }
  const spec = websiteSpec(website);
  const apiVersion = website.apiVersion ?? API_VERSION;
  const owner = ownerReference(website, apiVersion);

  // The informer cache of an owned kind: no API round trip.
  const existing = cache.get({ apiVersion: 'apps/v1', kind: 'Deployment' }, namespace, name);
  if (existing == null) {
    log.log('info', `creating the Deployment and Service of Website ${namespace}/${name}`);
  }

  call('failed to apply the Deployment', () =>
    client.apply(JSON.stringify(deployment(spec, namespace, owner)), true, undefined));
  call('failed to apply the Service', () =>
    client.apply(JSON.stringify(service(name, namespace, owner)), true, undefined));
  const status = {
    apiVersion,
    kind: KIND,
    metadata: { name, namespace },
    status: {
      observedGeneration: website.metadata?.generation ?? null,
      image: spec.image,
      replicas: spec.replicas,
      deployment: name,
      service: name,
    },
  };
  call("failed to apply the Website's status", () =>
    client.apply(JSON.stringify(status), true, 'status'));
  log.log('debug', `${apiVersion} ${KIND} ${namespace}/${name} serves ${spec.image} with ${spec.replicas} replicas`);
  return { tag: 'requeue-after', val: RECHECK_MS };
}

/** What the user asks for: which image to serve, with how many replicas. */
function websiteSpec(website) {
  const spec = website.spec;
  if (typeof spec?.image !== 'string') {
    throw new Error('the Website does not parse: spec.image must be a string');
  }
  if (!Number.isInteger(spec.replicas)) {
    throw new Error('the Website does not parse: spec.replicas must be an integer');
  }
  return { image: spec.image, replicas: spec.replicas };
}

/** The controller reference from a child to its Website, so the child goes with it. */
function ownerReference(website, apiVersion) {
  const name = website.metadata?.name;
  const uid = website.metadata?.uid;
  if (!name) throw new Error('the Website has no name');
  if (!uid) throw new Error('the Website has no uid');
  return {
    apiVersion,
    kind: KIND,
    name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The labels of everything a Website named `name` owns. */
function labels(name) {
  return { [NAME_LABEL]: name };
}

/** The metadata of a child of the Website: same name and namespace, labelled, owned. */
function childMetadata(name, namespace, owner) {
  return { name, namespace, labels: labels(name), ownerReferences: [owner] };
}

/** The Deployment serving the Website: `spec.replicas` pods of `spec.image` on port 80. */
function deployment(spec, namespace, owner) {
  const name = owner.name;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: childMetadata(name, namespace, owner),
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: labels(name) },
      template: {
        metadata: { labels: labels(name) },
        spec: {
          containers: [{
            name: 'web',
            image: spec.image,
            ports: [{ name: 'http', containerPort: 80 }],
          }],
        },
      },
    },
  };
}

/** The Service in front of the Deployment's pods, port 80. */
function service(name, namespace, owner) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMetadata(name, namespace, owner),
    spec: {
      selector: labels(name),
      ports: [{ name: 'http', port: 80, targetPort: 80 }],
    },
  };
}

/** Parses JSON text the host handed over; a parse failure names `what`. */
function parse(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${messageOf(error)}`);
  }
}

/** Runs one host call; a failure becomes an Error saying `context`, then why. */
function call(context, fn) {
  try {
    return fn();
  } catch (error) {
    throw new Error(`${context}: ${messageOf(error)}`);
  }
}

/** Words for anything thrown: a host call's `call-error` payload, an Error, or a value. */
function messageOf(error) {
  const payload = error?.payload;
  if (payload?.tag !== undefined) {
    return describeCallError(payload);
  }
  if (typeof error?.message === 'string') {
    return error.message;
  }
  return String(error);
}

/** Says what a failed host call (a WIT `call-error` variant) means. */
function describeCallError({ tag, val }) {
  switch (tag) {
    case 'denied':
      return `the plugin may not make the call: ${val}`;
    case 'invalid':
      return `the host refused malformed arguments: ${val}`;
    case 'api':
      return `the API server refused the call (${val.code} ${val.reason}): ${val.message}`;
    case 'unavailable':
      return `the API server could not be reached: ${val}`;
    default:
      return `host call failed: ${tag} ${JSON.stringify(val)}`;
  }
}
