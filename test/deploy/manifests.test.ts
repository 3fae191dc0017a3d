// The Kubernetes manifests (deploy/kubernetes) and the compose files, without a cluster or a
// kustomize binary: every YAML document parses; every Kubernetes object validates against the
// Kubernetes schemas (kubernetes-models); the kustomization lists every manifest; and what the
// files say of each other and of Errand agrees (selectors, references, probes, the metrics
// port, the sandbox's settings, the names of Errand's settings, the image's user).
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { INamespace } from 'kubernetes-models/v1/Namespace';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { Secret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import { Service } from 'kubernetes-models/v1/Service';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from './support.ts';

const K8S = path.join(ROOT, 'deploy/kubernetes');

/** Each kind the manifests use, validated by its schema (throws on a violation). */
const schemas = new Map<string, (data: unknown) => void>([
  ['apps/v1 Deployment', (d) => new Deployment(d as IDeployment).validate()],
  ['v1 Service', (d) => new Service(d as IService).validate()],
  ['v1 ConfigMap', (d) => new ConfigMap(d as IConfigMap).validate()],
  ['v1 Secret', (d) => new Secret(d as ISecret).validate()],
  ['v1 Namespace', (d) => new Namespace(d as INamespace).validate()],
  [
    'policy/v1 PodDisruptionBudget',
    (d) => new PodDisruptionBudget(d as IPodDisruptionBudget).validate(),
  ],
]);

async function parseDocuments(file: string): Promise<unknown[]> {
  const docs = parseAllDocuments(await readFile(file, 'utf8'), { uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  return list.map((doc) => {
    assert.deepEqual(doc.errors, [], `${file}: ${doc.errors.join('; ')}`);
    return doc.toJS() as unknown;
  });
}

async function manifestFiles(): Promise<string[]> {
  return (await readdir(K8S)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
}

interface Kustomization {
  namespace: string;
  resources: string[];
  images: Array<{ name: string; newName: string; newTag: string }>;
  replicas: Array<{ name: string; count: number }>;
}

interface Loaded {
  kustomization: Kustomization;
  objects: Array<{ file: string; kind: string; name: string; data: Record<string, unknown> }>;
  deployment(name: string): IDeployment;
  one<T>(kind: string, name: string): T;
}

async function load(): Promise<Loaded> {
  const [kustomization] = (await parseDocuments(path.join(K8S, 'kustomization.yaml'))) as [
    Kustomization,
  ];
  const objects: Loaded['objects'] = [];
  for (const file of await manifestFiles()) {
    for (const doc of await parseDocuments(path.join(K8S, file))) {
      const data = doc as { kind: string; metadata: { name: string } };
      objects.push({ file, kind: data.kind, name: data.metadata.name, data: doc as never });
    }
  }
  const one = <T>(kind: string, name: string): T => {
    const found = objects.find((o) => o.kind === kind && o.name === name);
    assert.ok(found, `no ${kind} ${name}`);
    return found.data as T;
  };
  return {
    kustomization,
    objects,
    one,
    deployment: (name) => one<IDeployment>('Deployment', name),
  };
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

describe('the Kubernetes manifests', () => {
  test('every document parses and validates against the Kubernetes schemas', async () => {
    const { objects } = await load();
    assert.ok(objects.length >= 7, `only ${objects.length} objects`);
    for (const { file, kind, name, data } of objects) {
      const validate = schemas.get(`${String(data.apiVersion)} ${kind}`);
      assert.ok(validate, `${file}: no schema here for ${String(data.apiVersion)} ${kind}`);
      assert.doesNotThrow(() => validate(data), `${file}: ${kind} ${name}`);
    }
    // The schemas catch what a cluster would refuse, e.g. a wrong type or enum value.
    const broken = structuredClone(objects.find((o) => o.kind === 'Deployment')?.data ?? {});
    (broken.spec as { replicas: unknown }).replicas = 'two';
    assert.throws(() => new Deployment(broken as unknown as IDeployment).validate(), /integer/);
  });

  test('the kustomization lists every manifest, names the image, and scales the workers', async () => {
    const { kustomization, objects } = await load();
    assert.deepEqual([...kustomization.resources].sort(), (await manifestFiles()).sort());
    assert.equal(kustomization.namespace, 'errand');
    const knob = kustomization.replicas.find((r) => r.name === 'errand-worker');
    assert.ok(knob && Number.isInteger(knob.count) && knob.count > 0);
    const images = new Set(kustomization.images.map((i) => i.name));
    for (const o of objects.filter((x) => x.kind === 'Deployment')) {
      const spec = (o.data as unknown as IDeployment).spec;
      for (const c of spec?.template.spec?.containers ?? [])
        assert.ok(images.has(c.image ?? ''), `${o.name}: image ${c.image} is not in images`);
    }
  });

  test('the API: serve --no-worker, readiness on /readyz, liveness on /healthz, behind the Service, a disruption budget', async () => {
    const { deployment, one } = await load();
    const api = deployment('errand-api');
    const pod = api.spec?.template;
    const [container] = pod?.spec?.containers ?? [];
    assert.ok(container);
    assert.deepEqual(container.args, ['errand', 'serve', '--no-worker']);
    assert.ok(selects(api.spec?.selector.matchLabels, pod?.metadata?.labels));
    const http = container.ports?.find((p) => p.name === 'http');
    assert.equal(http?.containerPort, 8080);
    assert.equal(container.readinessProbe?.httpGet?.path, '/readyz');
    assert.equal(container.readinessProbe?.httpGet?.port, 'http');
    assert.equal(container.livenessProbe?.httpGet?.path, '/healthz');
    assert.equal(container.livenessProbe?.httpGet?.port, 'http');
    assert.ok(container.resources?.requests?.cpu && container.resources.requests.memory);

    const service = one<IService>('Service', 'errand');
    assert.ok(selects(service.spec?.selector, pod?.metadata?.labels));
    assert.ok(
      !selects(service.spec?.selector, deployment('errand-worker').spec?.template.metadata?.labels),
      'the Service must not send requests to workers',
    );
    assert.equal(service.spec?.ports?.[0]?.targetPort, 'http');

    const pdb = one<IPodDisruptionBudget>('PodDisruptionBudget', 'errand-api');
    assert.ok(selects(pdb.spec?.selector?.matchLabels, pod?.metadata?.labels));
    assert.ok((api.spec?.replicas ?? 1) > Number(pdb.spec?.minAvailable ?? 0));
  });

  test('the workers: errand worker, the sandbox allowed its /proc in a user namespace, a disruption budget', async () => {
    const { deployment, one } = await load();
    const worker = deployment('errand-worker');
    const pod = worker.spec?.template;
    const [container] = pod?.spec?.containers ?? [];
    assert.ok(container);
    assert.deepEqual(container.args, ['errand', 'worker']);
    assert.ok(selects(worker.spec?.selector.matchLabels, pod?.metadata?.labels));
    // procMount: Unmasked is allowed only in a pod with its own user namespace.
    assert.equal(container.securityContext?.procMount, 'Unmasked');
    assert.equal(pod?.spec?.hostUsers, false);
    assert.ok(container.resources?.requests?.cpu && container.resources.requests.memory);
    const pdb = one<IPodDisruptionBudget>('PodDisruptionBudget', 'errand-worker');
    assert.ok(selects(pdb.spec?.selector?.matchLabels, pod?.metadata?.labels));
  });

  test('settings: the references exist, Errand reads every name, metrics are annotated where they are served', async () => {
    const { objects, one } = await load();
    const config = one<IConfigMap>('ConfigMap', 'errand-config').data ?? {};
    const secret = one<ISecret>('Secret', 'errand-secrets').stringData ?? {};
    for (const name of [...Object.keys(config), ...Object.keys(secret)])
      assert.ok(await errandReads(name), `Errand reads no ${name}`);
    assert.ok(config.ERRAND_PUBLIC_URL, 'workers refuse to start without ERRAND_PUBLIC_URL');
    assert.ok(secret.DATABASE_URL?.startsWith('postgres://'));
    assert.ok((secret.ERRAND_SECRET_KEY ?? '').length >= 16);

    const containerfile = await readFile(path.join(ROOT, 'deploy/Containerfile'), 'utf8');
    const user = /^USER (\d+):(\d+)$/m.exec(containerfile);
    assert.ok(user, 'the Containerfile sets a numeric user');
    for (const o of objects.filter((x) => x.kind === 'Deployment')) {
      const pod = (o.data as unknown as IDeployment).spec?.template;
      assert.equal(pod?.spec?.securityContext?.runAsUser, Number(user[1]), o.name);
      assert.equal(pod?.spec?.securityContext?.runAsNonRoot, true, o.name);
      for (const c of pod?.spec?.containers ?? []) {
        assert.deepEqual(
          c.envFrom?.map((e) => e.configMapRef?.name ?? e.secretRef?.name),
          ['errand-config', 'errand-secrets'],
        );
        const annotations: Record<string, string> = pod?.metadata?.annotations ?? {};
        assert.equal(annotations['prometheus.io/scrape'], 'true');
        assert.equal(annotations['prometheus.io/path'], '/metrics');
        assert.equal(annotations['prometheus.io/port'], config.ERRAND_METRICS_PORT);
        assert.ok(c.ports?.some((p) => String(p.containerPort) === config.ERRAND_METRICS_PORT));
      }
    }
    assert.equal(config.ERRAND_METRICS_HOST, '0.0.0.0', 'Prometheus scrapes the pod address');
  });
});

describe('the compose files', () => {
  type ComposeService = {
    image?: string;
    command?: string[];
    env_file?: string;
    restart?: string;
    network_mode?: string;
    security_opt?: string[];
    deploy?: { replicas?: string | number };
    depends_on?: Record<string, { condition: string }>;
    environment?: Record<string, string>;
  };
  /** A variable with a default, as the compose files write it: ${NAME:-default}. */
  const variable = (name: string, fallback: string) => `\${${name}:-${fallback}}`;
  const readCompose = async (file: string) =>
    parse(await readFile(path.join(ROOT, 'deploy', file), 'utf8'), {
      merge: true,
      uniqueKeys: true,
    }) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };

  test('PostgreSQL, the migrations once, the API, the workers; restart policies, the env file', async () => {
    const { services, volumes } = await readCompose('compose.yaml');
    assert.deepEqual(Object.keys(services).sort(), ['api', 'migrate', 'postgres', 'worker']);
    for (const [name, s] of Object.entries(services)) {
      assert.ok(s.restart, `${name} has no restart policy`);
      assert.equal(s.env_file, variable('ERRAND_ENV_FILE', 'errand.env'), name);
    }
    assert.deepEqual(services.migrate?.command, ['errand', 'migrate']);
    assert.equal(services.migrate?.restart, 'on-failure');
    assert.deepEqual(services.api?.command, ['errand', 'serve', '--no-worker']);
    assert.deepEqual(services.worker?.command, ['errand', 'worker']);
    for (const name of ['api', 'worker'])
      assert.equal(
        services[name]?.depends_on?.migrate?.condition,
        'service_completed_successfully',
      );
    assert.deepEqual(services.worker?.security_opt, ['systempaths=unconfined']);
    assert.equal(services.worker?.deploy?.replicas, variable('ERRAND_WORKERS', '2'));
    assert.ok(volumes && 'postgres' in volumes);
  });

  test('the host-network variant puts every service on the host network, on loopback', async () => {
    const base = await readCompose('compose.yaml');
    const { services } = await readCompose('compose.host-network.yaml');
    assert.deepEqual(Object.keys(services).sort(), Object.keys(base.services).sort());
    for (const [name, s] of Object.entries(services)) assert.equal(s.network_mode, 'host', name);
    assert.equal(services.api?.environment?.ERRAND_HOST, '127.0.0.1');
    assert.ok(services.postgres?.command?.includes('listen_addresses=127.0.0.1'));
  });

  test('the example env file names only settings Errand or the PostgreSQL image reads', async () => {
    const text = await readFile(path.join(ROOT, 'deploy/errand.env.example'), 'utf8');
    const names = text
      .split('\n')
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => l.slice(0, l.indexOf('=')));
    assert.ok(names.includes('ERRAND_PUBLIC_URL') && names.includes('ERRAND_SECRET_KEY'));
    for (const name of names.filter((n) => n !== 'POSTGRES_PASSWORD'))
      assert.ok(await errandReads(name), `Errand reads no ${name}`);
  });
});
