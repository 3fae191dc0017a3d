// The Kubernetes manifests (deploy/kubernetes, its components and the example overlay) and the
// compose files, without a cluster or a kustomize binary: every kustomization renders as
// `kubectl kustomize` would (./kustomize.ts), every rendered object validates against its
// schema (kubernetes-models, and the Prometheus Operator's and KEDA's CRDs), every pod passes
// the Pod Security level its namespace enforces (./pod-security.ts), and what the files say
// of each other and of Errand agrees (selectors, references, probes, the metrics port, the
// sandbox's settings, the drain and the grace periods, memory, the names of Errand's settings).
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { Secret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import { Service } from 'kubernetes-models/v1/Service';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { isWellFormedKey } from '../../src/keys/format.ts';
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { KustomizeError, type Resource, render } from './kustomize.ts';
import { violations } from './pod-security.ts';
import { ROOT } from './support.ts';

const K8S = path.join(ROOT, 'deploy/kubernetes');
const OVERLAY = path.join(ROOT, 'deploy/kubernetes-example-overlay');
const COMPONENTS = path.join(K8S, 'components');

/** Each kind the manifests use, validated by its schema (throws on a violation). */
const schemas = new Map<string, (data: unknown) => void>([
  ['apps/v1 Deployment', (d) => new Deployment(d as never).validate()],
  ['v1 Service', (d) => new Service(d as never).validate()],
  ['v1 ConfigMap', (d) => new ConfigMap(d as never).validate()],
  ['v1 Secret', (d) => new Secret(d as never).validate()],
  ['v1 Namespace', (d) => new Namespace(d as never).validate()],
  ['v1 PersistentVolumeClaim', (d) => new PersistentVolumeClaim(d as never).validate()],
  ['policy/v1 PodDisruptionBudget', (d) => new PodDisruptionBudget(d as never).validate()],
  ['networking.k8s.io/v1 NetworkPolicy', (d) => new NetworkPolicy(d as never).validate()],
  ['monitoring.coreos.com/v1 PodMonitor', (d) => new PodMonitor(d as never).validate()],
  ['keda.sh/v1alpha1 ScaledObject', (d) => new ScaledObject(d as never).validate()],
]);

/** The renderings CI checks: the base, the example overlay, and it with every component. */
async function renderings(): Promise<Array<{ name: string; objects: Resource[] }>> {
  const all = await withOverlay(
    (await readdir(COMPONENTS)).map((c) => path.join(COMPONENTS, c)),
    async (dir) => render(dir),
  );
  return [
    { name: 'base', objects: await render(K8S) },
    { name: 'example overlay', objects: await render(OVERLAY) },
    { name: 'every component', objects: all },
  ];
}

/** An overlay of the base with `components`, in a temporary folder, given to `use`. */
async function withOverlay<T>(components: string[], use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), 'errand-overlay-'));
  try {
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      namespace: 'errand',
      labels: [{ pairs: { 'app.kubernetes.io/part-of': 'errand' } }],
      resources: [path.relative(dir, K8S)],
      components: components.map((c) => path.relative(dir, c)),
    };
    await writeFile(path.join(dir, 'kustomization.yaml'), JSON.stringify(kustomization));
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function find<T>(objects: Resource[], kind: string, name: string): T {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  assert.equal(found.length, 1, `${kind} ${name}: ${found.length} found`);
  return found[0] as unknown as T;
}

const deployment = (objects: Resource[], name: string) =>
  find<IDeployment>(objects, 'Deployment', name);

function podSpec(d: IDeployment): IPodSpec {
  const spec = d.spec?.template.spec;
  assert.ok(spec, `${d.metadata?.name}: no pod template`);
  return spec;
}

function container(spec: IPodSpec, name: string, init = false): IContainer {
  const found = (init ? spec.initContainers : spec.containers)?.find((c) => c.name === name);
  assert.ok(found, `no ${init ? 'init ' : ''}container ${name}`);
  return found;
}

/** Whether src/config.ts, the one reader of the environment, reads the setting `name`. */
async function errandReads(name: string): Promise<boolean> {
  const reader = await readFile(path.join(ROOT, 'src/config.ts'), 'utf8');
  return new RegExp(`(?<![A-Z_])${name}(?![A-Z_])`).test(reader);
}

/** Labels a selector's matchLabels asks for are all among `labels`. */
function selects(
  selector: Record<string, string> | undefined,
  labels: Record<string, string> | undefined,
): boolean {
  assert.ok(selector && Object.keys(selector).length > 0, 'an empty selector');
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** Kubernetes quantities as bytes (the binary and decimal suffixes the manifests use). */
function bytes(quantity: string | number | undefined): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity ?? ''));
  assert.ok(m, `not a quantity: ${quantity}`);
  const unit = {
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Number(m[1]) * (m[2] ? unit[m[2] as keyof typeof unit] : 1);
}

/** The YAML files of a folder and those below it. */
async function yamlFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.yaml'))
    .map((e) => path.join(e.parentPath, e.name));
}

describe('the Kubernetes manifests render and validate', () => {
  test('the base, the example overlay and every component render, and every object validates against its schema', async () => {
    for (const { name, objects } of await renderings()) {
      assert.ok(objects.length >= 7, `${name}: only ${objects.length} objects`);
      for (const o of objects) {
        const validate = schemas.get(`${o.apiVersion} ${o.kind}`);
        assert.ok(validate, `${name}: no schema here for ${o.apiVersion} ${o.kind}`);
        assert.doesNotThrow(() => validate(o), `${name}: ${o.kind} ${o.metadata.name}`);
        if (o.kind !== 'Namespace')
          assert.equal(o.metadata.namespace, 'errand', `${name}: ${o.kind} ${o.metadata.name}`);
        assert.equal(
          o.metadata.labels?.['app.kubernetes.io/part-of'],
          'errand',
          `${name}: ${o.kind} ${o.metadata.name}`,
        );
      }
    }
    // The schemas catch what a cluster would refuse, e.g. a wrong type or enum value.
    const broken = structuredClone(deployment(await render(K8S), 'errand-worker'));
    (broken.spec as { replicas: unknown }).replicas = 'two';
    assert.throws(() => new Deployment(broken).validate(), /integer/);
    const scaled = find<Record<string, unknown>>(
      await render(OVERLAY),
      'ScaledObject',
      'errand-worker',
    );
    (scaled.spec as { minReplicaCount: unknown }).minReplicaCount = 'one';
    assert.throws(() => new ScaledObject(scaled as never).validate(), /integer/);
  });

  test('every YAML file is a resource or a patch of a kustomization, so none escapes the checks', async () => {
    const used = new Set<string>();
    for (const file of await yamlFiles(K8S)) {
      if (path.basename(file) !== 'kustomization.yaml') continue;
      const k = parse(await readFile(file, 'utf8')) as {
        resources?: string[];
        patches?: Array<{ path?: string }>;
      };
      for (const r of k.resources ?? []) used.add(path.resolve(path.dirname(file), r));
      for (const p of k.patches ?? [])
        if (p.path) used.add(path.resolve(path.dirname(file), p.path));
    }
    for (const file of await yamlFiles(K8S))
      if (path.basename(file) !== 'kustomization.yaml')
        assert.ok(used.has(file), `${path.relative(ROOT, file)} is in no kustomization`);
  });

  test('the base: its namespace, labels, image and worker count, as kustomize applies them', async () => {
    const objects = await render(K8S);
    const k = parse(await readFile(path.join(K8S, 'kustomization.yaml'), 'utf8')) as {
      images: Array<{ newName: string; newTag: string }>;
      replicas: Array<{ name: string; count: number }>;
    };
    const image = `${k.images[0]?.newName}:${k.images[0]?.newTag}`;
    for (const o of objects.filter((x) => x.kind === 'Deployment')) {
      const spec = podSpec(o as unknown as IDeployment);
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])])
        assert.equal(c.image, image, `${o.metadata.name}/${c.name}`);
    }
    const knob = k.replicas.find((r) => r.name === 'errand-worker');
    assert.ok(knob && knob.count > 0);
    assert.equal(deployment(objects, 'errand-worker').spec?.replicas, knob.count);
  });

  test('the renderer refuses what kustomize would, and what it does not render', async () => {
    await assert.rejects(
      withOverlay([path.join(COMPONENTS, 'keda'), path.join(COMPONENTS, 'keda')], render),
      /defined twice/,
    );
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-kustomize-'));
    try {
      const write = (k: object) =>
        writeFile(
          path.join(dir, 'kustomization.yaml'),
          JSON.stringify({
            apiVersion: 'kustomize.config.k8s.io/v1beta1',
            kind: 'Kustomization',
            resources: [path.relative(dir, K8S)],
            ...k,
          }),
        );
      // A patch of a Deployment that is not there.
      await write({
        patches: [
          {
            patch:
              'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: errand-nothing\nspec:\n  replicas: 1\n',
          },
        ],
      });
      await assert.rejects(render(dir), /no resource matches/);
      // A field this renderer does not apply is an error, not ignored.
      await write({ commonAnnotations: { a: 'b' } });
      await assert.rejects(render(dir), KustomizeError);
      // A JSON patch's failing test stops the rendering.
      await write({
        patches: [
          {
            target: { kind: 'Deployment', name: 'errand-worker' },
            patch: '- op: test\n  path: /spec/template/spec/hostUsers\n  value: true\n',
          },
        ],
      });
      await assert.rejects(render(dir), /test failed/);
      // An overlay inside its base: kustomize's cycle.
      await writeFile(
        path.join(dir, 'kustomization.yaml'),
        JSON.stringify({
          apiVersion: 'kustomize.config.k8s.io/v1beta1',
          kind: 'Kustomization',
          resources: ['..'],
        }),
      );
      await assert.rejects(render(dir), /cycle detected/);
      // Merge semantics: a named container is merged, null deletes, other lists are replaced.
      await write({
        patches: [
          {
            patch:
              'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: errand-worker\nspec:\n  template:\n    spec:\n      hostUsers: null\n      initContainers:\n        - name: engines\n          $patch: delete\n      containers:\n        - name: errand\n          args: ["errand", "version"]\n',
          },
          {
            target: { kind: 'Deployment', name: 'errand-api' },
            patch:
              '- op: replace\n  path: /spec/replicas\n  value: 5\n- op: add\n  path: /spec/template/spec/containers/0/env\n  value: []\n- op: add\n  path: /spec/template/spec/containers/0/env/-\n  value: {name: A, value: b}\n',
          },
        ],
      });
      const objects = await render(dir);
      const worker = podSpec(deployment(objects, 'errand-worker'));
      assert.equal(worker.hostUsers, undefined);
      assert.deepEqual(worker.containers[0]?.args, ['errand', 'version']);
      assert.equal(worker.containers[0]?.securityContext?.procMount, 'Unmasked');
      assert.equal(worker.initContainers?.length, 0);
      const api = deployment(objects, 'errand-api');
      assert.equal(api.spec?.replicas, 5);
      assert.deepEqual(podSpec(api).containers[0]?.env, [{ name: 'A', value: 'b' }]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the Kubernetes pods', () => {
  test('Pod Security: the namespace enforces baseline and warns of restricted; each pod meets baseline, the API restricted', async () => {
    for (const { name, objects } of await renderings()) {
      const ns = find<{ metadata: { labels: Record<string, string> } }>(
        objects,
        'Namespace',
        'errand',
      );
      const labels = ns.metadata.labels;
      assert.equal(labels['pod-security.kubernetes.io/enforce'], 'baseline');
      for (const mode of ['audit', 'warn'])
        assert.equal(labels[`pod-security.kubernetes.io/${mode}`], 'restricted');
      for (const mode of ['enforce', 'audit', 'warn'])
        assert.equal(
          labels[`pod-security.kubernetes.io/${mode}-version`],
          'v1.35',
          `${mode}: the checks here are v1.35's`,
        );
      for (const d of objects.filter((o) => o.kind === 'Deployment')) {
        const pod = (d as unknown as IDeployment).spec?.template;
        const args = [
          podSpec(d as unknown as IDeployment),
          pod?.metadata?.annotations ?? {},
        ] as const;
        assert.deepEqual(violations(...args, 'baseline'), [], `${name}: ${d.metadata.name}`);
        // The worker falls short of restricted by its procMount alone, which the sandbox needs.
        const expected = d.metadata.name === 'errand-worker' ? ['errand: procMount Unmasked'] : [];
        assert.deepEqual(
          violations(...args, 'restricted'),
          expected,
          `${name}: ${d.metadata.name}`,
        );
      }
    }
    // The checks refuse what the issue found: Unconfined seccomp; Unmasked /proc without a
    // user namespace of the pod's own.
    const worker = podSpec(deployment(await render(K8S), 'errand-worker'));
    const unconfined = structuredClone(worker);
    unconfined.securityContext = {
      ...unconfined.securityContext,
      seccompProfile: { type: 'Unconfined' },
    };
    assert.deepEqual(violations(unconfined, {}, 'baseline'), ['seccomp Unconfined (pod)']);
    const hostUsers = { ...structuredClone(worker), hostUsers: true };
    assert.deepEqual(violations(hostUsers, {}, 'baseline'), [
      'errand: procMount Unmasked without a user namespace',
    ]);
  });

  test("the workers: the sandbox (user namespace, unmasked /proc, Errand's seccomp and AppArmor profiles), no token, liveness on the metrics port", async () => {
    const objects = await render(K8S);
    const config = find<IConfigMap>(objects, 'ConfigMap', 'errand-config').data ?? {};
    const worker = deployment(objects, 'errand-worker');
    const spec = podSpec(worker);
    const main = container(spec, 'errand');
    assert.deepEqual(main.args, ['errand', 'worker']);
    assert.ok(selects(worker.spec?.selector.matchLabels, worker.spec?.template.metadata?.labels));
    // procMount: Unmasked is allowed only in a pod with its own user namespace.
    assert.equal(main.securityContext?.procMount, 'Unmasked');
    assert.equal(spec.hostUsers, false);
    assert.equal(spec.automountServiceAccountToken, false);
    assert.deepEqual(spec.securityContext?.seccompProfile, {
      type: 'Localhost',
      localhostProfile: 'errand/seccomp-errand.json',
    });
    assert.deepEqual(spec.securityContext?.appArmorProfile, {
      type: 'Localhost',
      localhostProfile: 'errand-sandbox',
    });
    for (const c of [...spec.containers, ...(spec.initContainers ?? [])])
      assert.equal(
        c.securityContext?.seccompProfile,
        undefined,
        `${c.name} keeps the pod's profile`,
      );
    // The profiles the manifest names are the ones Errand ships.
    const seccomp = JSON.parse(
      await readFile(path.join(ROOT, 'deploy/security/seccomp-errand.json'), 'utf8'),
    ) as { defaultAction?: string };
    assert.equal(
      seccomp.defaultAction,
      'SCMP_ACT_ERRNO',
      "an allowlist, like the runtimes' default",
    );
    const apparmor = await readFile(path.join(ROOT, 'deploy/security/apparmor-errand'), 'utf8');
    assert.match(apparmor, /^profile errand-sandbox\b/m);
    // Liveness: the worker's /healthz on its metrics listener, which listens on the pod's address.
    for (const probe of [main.livenessProbe, main.startupProbe]) {
      assert.equal(probe?.httpGet?.path, '/healthz');
      assert.equal(probe?.httpGet?.port, 'metrics');
    }
    assert.equal(
      main.ports?.find((p) => p.name === 'metrics')?.containerPort,
      Number(config.ERRAND_METRICS_PORT),
    );
    assert.equal(config.ERRAND_METRICS_HOST, '0.0.0.0');
    assert.equal(main.readinessProbe, undefined, 'a worker is in no Service');
    const pdb = find<IPodDisruptionBudget>(objects, 'PodDisruptionBudget', 'errand-worker');
    assert.ok(selects(pdb.spec?.selector?.matchLabels, worker.spec?.template.metadata?.labels));
  });

  test("shutdown: the worker's grace period is ERRAND_DRAIN_SECONDS + 30; the API waits 10 s in preStop within 40", async () => {
    const objects = await render(K8S);
    const config = find<IConfigMap>(objects, 'ConfigMap', 'errand-config').data ?? {};
    const drain = Number(config.ERRAND_DRAIN_SECONDS);
    assert.ok(Number.isInteger(drain) && drain > 0, 'the configmap sets ERRAND_DRAIN_SECONDS');
    assert.equal(
      podSpec(deployment(objects, 'errand-worker')).terminationGracePeriodSeconds,
      drain + 30,
    );
    const api = podSpec(deployment(objects, 'errand-api'));
    assert.equal(api.terminationGracePeriodSeconds, 40);
    const preStop = container(api, 'errand').lifecycle?.preStop;
    assert.equal(preStop?.sleep?.seconds, 10);
    assert.ok((api.terminationGracePeriodSeconds ?? 30) > (preStop?.sleep?.seconds ?? 0) + 20);
  });

  test('engines: an init container installs ERRAND_ENGINES into the engines volume each pod mounts at ERRAND_ENGINES_DIR', async () => {
    for (const objects of [await render(K8S), await render(OVERLAY)]) {
      const config = find<IConfigMap>(objects, 'ConfigMap', 'errand-config').data ?? {};
      assert.equal(config.ERRAND_ENGINES_DIR, '/var/lib/errand-engines');
      const engines = (config.ERRAND_ENGINES ?? '').split(',');
      assert.ok(
        engines.length > 0 &&
          engines.every((e) => ['claude-code', 'codex', 'opencode'].includes(e)),
      );
      for (const name of ['errand-api', 'errand-worker']) {
        const spec = podSpec(deployment(objects, name));
        const init = container(spec, 'engines', true);
        assert.deepEqual(init.args, ['errand', 'engine', 'install']);
        // It needs no secret: the settings only.
        assert.deepEqual(init.envFrom, [{ configMapRef: { name: 'errand-config' } }]);
        const mount = (c: IContainer) =>
          c.volumeMounts?.find((m) => m.mountPath === config.ERRAND_ENGINES_DIR);
        assert.equal(
          mount(init)?.readOnly,
          undefined,
          `${name}: the init container writes the engines`,
        );
        assert.equal(
          mount(container(spec, 'errand'))?.readOnly,
          true,
          `${name}: Errand reads them`,
        );
        assert.equal(mount(init)?.name, mount(container(spec, 'errand'))?.name);
      }
    }
    // The shared variant: one ReadWriteMany claim for every pod, no emptyDir left beside it.
    const shared = await render(OVERLAY);
    const claim = find<{ spec: { accessModes: string[] } }>(
      shared,
      'PersistentVolumeClaim',
      'errand-engines',
    );
    assert.deepEqual(claim.spec.accessModes, ['ReadWriteMany']);
    for (const name of ['errand-api', 'errand-worker'])
      assert.deepEqual(
        podSpec(deployment(shared, name)).volumes?.find((v) => v.name === 'engines'),
        { name: 'engines', persistentVolumeClaim: { claimName: 'errand-engines' } },
      );
  });

  test("resources: ephemeral-storage covers the volumes; the worker's memory fits its runs by the formula", async () => {
    const objects = await render(K8S);
    for (const name of ['errand-api', 'errand-worker']) {
      const spec = podSpec(deployment(objects, name));
      const disk = (spec.volumes ?? []).reduce((sum, v) => {
        if (!v.emptyDir) return sum;
        assert.ok(v.emptyDir.sizeLimit, `${name}: volume ${v.name} has no sizeLimit`);
        return sum + bytes(v.emptyDir.sizeLimit);
      }, 0);
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        const r = c.resources;
        assert.ok(
          bytes(r?.requests?.['ephemeral-storage']) >= disk,
          `${name}/${c.name}: ephemeral-storage request below its volumes'`,
        );
        assert.ok(
          bytes(r?.limits?.['ephemeral-storage']) >= bytes(r?.requests?.['ephemeral-storage']),
          `${name}/${c.name}`,
        );
        assert.ok(r?.limits?.memory && r.requests?.memory, `${name}/${c.name}: memory`);
      }
    }
    // Base 1 GiB + ERRAND_CONCURRENCY runs, each within the default commandMemoryMb.
    const config = find<IConfigMap>(objects, 'ConfigMap', 'errand-config').data ?? {};
    const concurrency = Number(config.ERRAND_CONCURRENCY);
    const worker = container(podSpec(deployment(objects, 'errand-worker')), 'errand').resources;
    const formula = 2 ** 30 + concurrency * DEFAULT_LIMITS.memoryMb * 2 ** 20;
    assert.ok(
      bytes(worker?.limits?.memory) >= formula,
      `the worker's limit is below ${formula / 2 ** 30} GiB`,
    );
    assert.equal(
      worker?.requests?.memory,
      worker?.limits?.memory,
      'the node keeps the room the formula counts',
    );
  });

  test('the API: serve --no-worker, probes, behind the Service, no token, no data volume, a disruption budget', async () => {
    const objects = await render(K8S);
    const api = deployment(objects, 'errand-api');
    const spec = podSpec(api);
    const main = container(spec, 'errand');
    assert.deepEqual(main.args, ['errand', 'serve', '--no-worker']);
    assert.ok(selects(api.spec?.selector.matchLabels, api.spec?.template.metadata?.labels));
    assert.equal(main.ports?.find((p) => p.name === 'http')?.containerPort, 8080);
    assert.equal(main.readinessProbe?.httpGet?.path, '/readyz');
    assert.equal(main.livenessProbe?.httpGet?.path, '/healthz');
    assert.equal(main.livenessProbe?.httpGet?.port, 'http');
    assert.equal(spec.automountServiceAccountToken, false);
    assert.ok(
      !main.volumeMounts?.some((m) => m.mountPath === '/var/lib/errand'),
      'the admin key comes from the Secret',
    );
    const service = find<IService>(objects, 'Service', 'errand');
    assert.ok(selects(service.spec?.selector, api.spec?.template.metadata?.labels));
    assert.ok(
      !selects(
        service.spec?.selector,
        deployment(objects, 'errand-worker').spec?.template.metadata?.labels,
      ),
      'the Service must not send requests to workers',
    );
    assert.equal(service.spec?.ports?.[0]?.targetPort, 'http');
    const pdb = find<IPodDisruptionBudget>(objects, 'PodDisruptionBudget', 'errand-api');
    assert.ok(selects(pdb.spec?.selector?.matchLabels, api.spec?.template.metadata?.labels));
    assert.ok((api.spec?.replicas ?? 1) > Number(pdb.spec?.minAvailable ?? 0));
  });

  test("settings: Errand reads every name; the secrets' placeholders are refused at start; every pod runs as the image's user", async () => {
    const objects = await render(K8S);
    const config = find<IConfigMap>(objects, 'ConfigMap', 'errand-config').data ?? {};
    const secret = find<ISecret>(objects, 'Secret', 'errand-secrets').stringData ?? {};
    for (const name of [...Object.keys(config), ...Object.keys(secret)])
      assert.ok(await errandReads(name), `Errand reads no ${name}`);
    assert.ok(config.ERRAND_PUBLIC_URL, 'workers refuse to start without ERRAND_PUBLIC_URL');
    assert.ok(secret.DATABASE_URL?.startsWith('postgres://'));
    // Left as shipped, the keys stop Errand at start: the secret key by its check, the admin
    // key by not being an Errand key.
    assert.throws(
      () => loadConfig({ ERRAND_SECRET_KEY: secret.ERRAND_SECRET_KEY }),
      /ERRAND_SECRET_KEY.*placeholder/,
    );
    assert.ok(secret.ERRAND_ADMIN_KEY, 'the first admin key comes from the Secret');
    assert.equal(isWellFormedKey(secret.ERRAND_ADMIN_KEY), false);

    const containerfile = await readFile(path.join(ROOT, 'deploy/Containerfile'), 'utf8');
    const user = /^USER (\d+):(\d+)$/m.exec(containerfile);
    assert.ok(user, 'the Containerfile sets a numeric user');
    for (const d of objects.filter((o) => o.kind === 'Deployment')) {
      const pod = (d as unknown as IDeployment).spec?.template;
      assert.equal(pod?.spec?.securityContext?.runAsUser, Number(user[1]), d.metadata.name);
      assert.equal(pod?.spec?.securityContext?.runAsNonRoot, true, d.metadata.name);
      const main = container(podSpec(d as unknown as IDeployment), 'errand');
      assert.deepEqual(
        main.envFrom?.map((e) => e.configMapRef?.name ?? e.secretRef?.name),
        ['errand-config', 'errand-secrets'],
      );
      const annotations: Record<string, string> = pod?.metadata?.annotations ?? {};
      assert.equal(annotations['prometheus.io/scrape'], 'true');
      assert.equal(annotations['prometheus.io/path'], '/metrics');
      assert.equal(annotations['prometheus.io/port'], config.ERRAND_METRICS_PORT);
      assert.ok(
        main.ports?.some(
          (p) => p.name === 'metrics' && String(p.containerPort) === config.ERRAND_METRICS_PORT,
        ),
      );
    }
  });
});

describe('the Kubernetes components', () => {
  test('network-policy: everything denied but DNS, the database and HTTPS to public addresses out, HTTP in to the API, metrics from monitoring', async () => {
    const objects = await render(OVERLAY);
    const deny = find<INetworkPolicy>(objects, 'NetworkPolicy', 'errand-default-deny');
    assert.deepEqual(deny.spec?.podSelector, {});
    assert.deepEqual(deny.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.equal(deny.spec?.ingress, undefined);
    assert.equal(deny.spec?.egress, undefined);
    const egress =
      find<INetworkPolicy>(objects, 'NetworkPolicy', 'errand-egress').spec?.egress ?? [];
    const rule = (port: number) => egress.find((r) => r.ports?.some((p) => p.port === port));
    assert.ok(rule(53)?.to?.some((t) => t.podSelector?.matchLabels?.['k8s-app'] === 'kube-dns'));
    assert.ok(rule(5432));
    const https = rule(443)?.to ?? [];
    const v4 = https.find((t) => t.ipBlock?.cidr === '0.0.0.0/0')?.ipBlock?.except ?? [];
    for (const refused of ['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])
      assert.ok(v4.includes(refused), `443 reaches ${refused}`);
    assert.ok(https.find((t) => t.ipBlock?.cidr === '::/0')?.ipBlock?.except?.includes('fc00::/7'));
    assert.ok(
      egress.every((r) => r.ports && r.ports.length > 0),
      'every way out names its ports',
    );
    for (const r of egress)
      for (const t of r.to ?? [])
        if (t.ipBlock?.cidr === '0.0.0.0/0')
          assert.ok(
            t.ipBlock.except?.includes('169.254.0.0/16'),
            'the metadata service is refused',
          );
    const metrics = find<INetworkPolicy>(objects, 'NetworkPolicy', 'errand-metrics-ingress');
    assert.deepEqual(metrics.spec?.ingress?.[0]?.ports, [{ protocol: 'TCP', port: 9464 }]);
    assert.ok(
      metrics.spec?.ingress?.[0]?.from?.length,
      'metrics from a namespace, not from anyone',
    );
  });

  test('pod-monitor and keda: the metrics port of both pods, and the workers scaled on errand_turns_queued', async () => {
    const objects = await render(OVERLAY);
    const monitor = find<{
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: Array<{ port: string; path: string }>;
      };
    }>(objects, 'PodMonitor', 'errand');
    for (const name of ['errand-api', 'errand-worker']) {
      const d = deployment(objects, name);
      assert.ok(
        selects(monitor.spec.selector.matchLabels, d.spec?.template.metadata?.labels),
        name,
      );
      const port = monitor.spec.podMetricsEndpoints[0]?.port;
      assert.ok(
        container(podSpec(d), 'errand').ports?.some((p) => p.name === port),
        name,
      );
    }
    assert.equal(monitor.spec.podMetricsEndpoints[0]?.path, '/metrics');

    const scaled = find<{
      spec: {
        scaleTargetRef: { name: string };
        triggers: Array<{ type: string; metadata: Record<string, string> }>;
      };
    }>(objects, 'ScaledObject', 'errand-worker');
    assert.equal(scaled.spec.scaleTargetRef.name, 'errand-worker');
    const metric = /\b(errand_[a-z_]+)\b/.exec(scaled.spec.triggers[0]?.metadata.query ?? '')?.[1];
    assert.equal(metric, 'errand_turns_queued');
    const metrics = await readFile(path.join(ROOT, 'src/metrics/metrics.ts'), 'utf8');
    assert.ok(metrics.includes(`name: '${metric}'`), 'Errand exports the metric');
    assert.equal(scaled.spec.triggers[0]?.type, 'prometheus');
    // KEDA owns the count: the Deployment leaves it unset, so `kubectl apply` keeps KEDA's.
    assert.equal(deployment(objects, 'errand-worker').spec?.replicas, undefined);
  });

  test('api-topology-spread and without-apparmor change only what they say', async () => {
    const spread =
      podSpec(deployment(await render(OVERLAY), 'errand-api')).topologySpreadConstraints ?? [];
    assert.deepEqual(
      spread.map((t) => t.topologyKey),
      ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    );
    const base = await render(K8S);
    const bare = await withOverlay([path.join(COMPONENTS, 'without-apparmor')], render);
    const worker = podSpec(deployment(bare, 'errand-worker'));
    assert.equal(worker.securityContext?.appArmorProfile, undefined);
    const expected = structuredClone(podSpec(deployment(base, 'errand-worker')));
    delete expected.securityContext?.appArmorProfile;
    assert.deepEqual(worker, expected);
  });
});

describe('the compose files', () => {
  type ComposeService = {
    image?: string;
    command?: string[];
    env_file?: string;
    restart?: string;
    user?: string;
    network_mode?: string;
    security_opt?: string[];
    volumes?: string[];
    deploy?: { replicas?: string | number };
    depends_on?: Record<string, { condition: string }>;
    environment?: Record<string, string>;
    healthcheck?: { test?: string[] };
    stop_grace_period?: string;
    logging?: { driver?: string; options?: Record<string, string> };
  };
  /** A variable with a default, as the compose files write it: ${NAME:-default}. */
  const variable = (name: string, fallback: string) => `\${${name}:-${fallback}}`;
  const readCompose = async (file: string) =>
    parse(await readFile(path.join(ROOT, 'deploy', file), 'utf8'), {
      merge: true,
      uniqueKeys: true,
    }) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
  const ENGINES = '/var/lib/errand-engines';
  const enginesVolume = variable('ERRAND_ENGINES_VOLUME', 'engines');

  test('PostgreSQL, the migrations and the engines once, the API, the workers; restart policies, the env files', async () => {
    const { services, volumes } = await readCompose('compose.yaml');
    assert.deepEqual(Object.keys(services).sort(), [
      'api',
      'engines',
      'migrate',
      'postgres',
      'worker',
    ]);
    for (const [name, s] of Object.entries(services)) {
      assert.ok(s.restart, `${name} has no restart policy`);
      // PostgreSQL gets its own file: the model keys and Errand's secrets stay out of it.
      assert.equal(
        s.env_file,
        name === 'postgres'
          ? variable('ERRAND_POSTGRES_ENV_FILE', 'errand-postgres.env')
          : variable('ERRAND_ENV_FILE', 'errand.env'),
        name,
      );
    }
    assert.deepEqual(services.migrate?.command, ['errand', 'migrate']);
    assert.equal(services.migrate?.restart, 'on-failure');
    assert.match(services.engines?.command?.at(-1) ?? '', /exec errand engine install;/);
    assert.equal(services.engines?.restart, 'on-failure');
    assert.deepEqual(services.api?.command, ['errand', 'serve', '--no-worker']);
    assert.deepEqual(services.worker?.command, ['errand', 'worker']);
    for (const name of ['api', 'worker'])
      for (const step of ['migrate', 'engines'])
        assert.equal(
          services[name]?.depends_on?.[step]?.condition,
          'service_completed_successfully',
          `${name} after ${step}`,
        );
    assert.equal(services.worker?.deploy?.replicas, variable('ERRAND_WORKERS', '2'));
    assert.ok(volumes && 'postgres' in volumes && 'engines' in volumes);
  });

  test('the engines: installed once into one volume, which the API and the workers mount read-only', async () => {
    const { services } = await readCompose('compose.yaml');
    const mounts = (name: string) =>
      (services[name]?.volumes ?? []).filter((v) => v.includes(`:${ENGINES}`));
    assert.deepEqual(mounts('engines'), [`${enginesVolume}:${ENGINES}`]);
    for (const name of ['api', 'worker'])
      assert.deepEqual(mounts(name), [`${enginesVolume}:${ENGINES}:ro`], name);
    for (const name of ['engines', 'api', 'worker'])
      assert.equal(services[name]?.environment?.ERRAND_ENGINES_DIR, ENGINES, name);
    assert.ok(await errandReads('ERRAND_ENGINES'));
  });

  test('health checks: PostgreSQL over TCP, the API on its port, a worker on its own metrics port', async () => {
    const { services } = await readCompose('compose.yaml');
    const check = (name: string) => {
      const test = services[name]?.healthcheck?.test ?? [];
      // podman-compose 1.0.6 runs only the first word of a CMD list: a shell string, always.
      assert.equal(test[0], 'CMD-SHELL', name);
      assert.equal(test.length, 2, name);
      return test[1] ?? '';
    };
    assert.match(check('postgres'), /^pg_isready --host=127\.0\.0\.1 /);
    assert.match(check('api'), /process\.env\.ERRAND_PORT \|\| 8080\) \+ '\/healthz'/);
    assert.match(check('worker'), /process\.env\.ERRAND_METRICS_PORT \+ '\/healthz'/);
    assert.equal(services.worker?.environment?.ERRAND_METRICS_PORT, '9464');
    assert.equal(services.worker?.environment?.ERRAND_METRICS_HOST, '0.0.0.0');
    assert.equal(services.api?.environment?.ERRAND_METRICS_PORT, undefined);
    // No $: compose would substitute it from the host's environment.
    for (const name of ['postgres', 'api', 'worker']) assert.ok(!check(name).includes('$'), name);
  });

  test('stop grace periods (drain + 30 s for workers), log rotation, the shipped seccomp profile', async () => {
    const { services } = await readCompose('compose.yaml');
    assert.equal(services.worker?.stop_grace_period, '330s');
    assert.equal(services.api?.stop_grace_period, '40s');
    for (const [name, s] of Object.entries(services)) {
      assert.equal(s.logging?.driver, 'json-file', name);
      assert.deepEqual(s.logging?.options, { 'max-size': '10m', 'max-file': '5' }, name);
    }
    assert.deepEqual(services.worker?.security_opt, [
      'systempaths=unconfined',
      'seccomp=./security/seccomp-errand.json',
    ]);
    for (const [name, s] of Object.entries(services))
      assert.ok(!(s.security_opt ?? []).includes('seccomp=unconfined'), name);
    // The path is the compose file's directory's (podman-compose and docker compose read it so).
    const profile = JSON.parse(
      await readFile(path.join(ROOT, 'deploy/security/seccomp-errand.json'), 'utf8'),
    ) as { defaultAction?: string };
    assert.equal(profile.defaultAction, 'SCMP_ACT_ERRNO');
  });

  test('the host-network variant puts every service on the host network, on loopback, a worker per port', async () => {
    const base = await readCompose('compose.yaml');
    const { services } = await readCompose('compose.host-network.yaml');
    assert.deepEqual(Object.keys(services).sort(), Object.keys(base.services).sort());
    for (const [name, s] of Object.entries(services)) assert.equal(s.network_mode, 'host', name);
    assert.equal(services.api?.environment?.ERRAND_HOST, '127.0.0.1');
    assert.ok(services.postgres?.command?.includes('listen_addresses=127.0.0.1'));
    assert.equal(services.worker?.environment?.ERRAND_METRICS_HOST, '127.0.0.1');
    assert.equal(
      services.worker?.environment?.ERRAND_METRICS_PORT,
      variable('ERRAND_WORKER_METRICS_PORT', '9464'),
    );
    // A string, as the base file's: podman-compose merges no int into a string.
    assert.equal(services.worker?.deploy?.replicas, '1');
  });

  test('the Docker variant: the AppArmor profile for workers, the engines volume given to the image user', async () => {
    const base = await readCompose('compose.yaml');
    const { services } = await readCompose('compose.docker.yaml');
    for (const name of Object.keys(services)) assert.ok(name in base.services, name);
    assert.deepEqual(services.worker?.security_opt, [
      ...(base.services.worker?.security_opt ?? []),
      'apparmor=errand-sandbox',
    ]);
    const install = services.engines?.command?.at(-1) ?? '';
    assert.equal(services.engines?.user, '0:0');
    assert.match(install, /^chown 10001:10001 \/var\/lib\/errand-engines && /);
    assert.match(
      install,
      /exec setpriv --reuid=10001 --regid=10001 --clear-groups errand engine install;/,
    );
    const containerfile = await readFile(path.join(ROOT, 'deploy/Containerfile'), 'utf8');
    assert.match(containerfile, /^USER 10001:10001$/m);
  });

  test('the example env files name only settings Errand, or the PostgreSQL image, reads', async () => {
    const names = async (file: string) =>
      (await readFile(path.join(ROOT, 'deploy', file), 'utf8'))
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => l.slice(0, l.indexOf('=')));
    const errand = await names('errand.env.example');
    for (const name of [
      'ERRAND_PUBLIC_URL',
      'ERRAND_SECRET_KEY',
      'ERRAND_ADMIN_KEY',
      'ERRAND_ENGINES',
    ])
      assert.ok(errand.includes(name), name);
    for (const name of errand) assert.ok(await errandReads(name), `Errand reads no ${name}`);
    assert.deepEqual(await names('errand-postgres.env.example'), ['POSTGRES_PASSWORD']);
  });
});
