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
