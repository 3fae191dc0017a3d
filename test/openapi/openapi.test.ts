// Errand's OpenAPI document (/openapi.json) and its reference page (/docs). The document must be
// valid OpenAPI 3.1 (checked by a mainstream validator), true to the routes (every response a
// real request gets validates against what the document says for its status), and compatible
// with the published Agent Job Service v2 interface that Errand implements
// (mintlify-agent-v2.json here is a copy of the published document).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv, type AnySchema } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { LOGGED_EVENT_TYPES, WEBHOOK_EVENT_TYPES } from '../../src/events/catalog.ts';
import { DOCS_CSP } from '../../src/http/openapi.ts';
import { createJobId, createRouteFixture, type RouteFixture } from '../support/route-cases.ts';
import { type HttpResult, startTestService, type TestService } from '../support/service.ts';

// ajv-formats is CommonJS: its function is the module's default export.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

type Json = Record<string, unknown>;
type Method = 'get' | 'post' | 'patch' | 'delete';

interface Operation {
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: Json }> };
  responses: Record<string, { description?: string; content?: Record<string, { schema: Json }> }>;
  security?: Record<string, string[]>[];
}

interface Document {
  openapi: string;
  paths: Record<string, Partial<Record<Method, Operation>>>;
  components?: { schemas?: Record<string, Json> };
}

/** A schema of Errand's document with its references to components written out. */
function inlineRefs(doc: Document, schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((entry) => inlineRefs(doc, entry));
  if (typeof schema !== 'object' || schema === null) return schema;
  const s = schema as Json;
  if (typeof s.$ref === 'string') {
    const name = s.$ref.replace('#/components/schemas/', '');
    const target = doc.components?.schemas?.[name];
    assert.ok(target, `Errand's document has no ${s.$ref}`);
    return inlineRefs(doc, target);
  }
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, inlineRefs(doc, v)]));
}

const published = JSON.parse(
  readFileSync(new URL('./mintlify-agent-v2.json', import.meta.url), 'utf8'),
) as Document & { components: { schemas: Record<string, Json> } };

/** Every route Errand documents; a route added without its schema fails here. */
const ERRAND_OPERATIONS = [
  'get /healthz',
  'get /readyz',
  'get /review/{jobId}',
  'get /v2/admin/audit',
  'post /v2/agent/{projectId}/job',
  'get /v2/agent/{projectId}/job/{id}',
  'post /v2/agent/{projectId}/job/{id}/message',
  'post /v2/agent/{projectId}/job/{id}/archive',
  'get /v2/agent/{projectId}/job/{id}/events',
  'get /v2/agent/{projectId}/jobs',
  'post /v2/admin/projects',
  'get /v2/admin/projects',
  'get /v2/admin/projects/{id}',
  'patch /v2/admin/projects/{id}',
  'post /v2/admin/keys',
  'get /v2/admin/keys',
  'post /v2/admin/keys/{id}/revoke',
  'get /v2/admin/users',
  'post /v2/admin/users/{id}/deactivate',
  'post /v2/admin/users/{id}/reactivate',
  'get /v2/admin/projects/{id}/roles',
  'put /v2/admin/projects/{id}/roles/{granteeKind}/{grantee}',
  'delete /v2/admin/projects/{id}/roles/{granteeKind}/{grantee}',
  'post /v2/admin/projects/{projectId}/webhooks',
  'get /v2/admin/projects/{projectId}/webhooks',
  'get /v2/admin/projects/{projectId}/webhooks/{webhookId}',
  'patch /v2/admin/projects/{projectId}/webhooks/{webhookId}',
  'delete /v2/admin/projects/{projectId}/webhooks/{webhookId}',
  'post /v2/admin/projects/{projectId}/schedules',
  'get /v2/admin/projects/{projectId}/schedules',
  'get /v2/admin/projects/{projectId}/schedules/{scheduleId}',
  'patch /v2/admin/projects/{projectId}/schedules/{scheduleId}',
  'delete /v2/admin/projects/{projectId}/schedules/{scheduleId}',
  'post /v2/admin/evals',
  'get /v2/admin/evals',
  'get /v2/admin/evals/{id}',
  'post /v2/admin/evals/{id}/cancel',
  'post /v2/admin/projects/{projectId}/webhooks/{webhookId}/rotate-secret',
  'get /v2/admin/projects/{projectId}/webhooks/{webhookId}/deliveries',
  'post /v2/admin/projects/{projectId}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver',
  'post /v2/admin/projects/{id}/forge-webhook-secret',
  'put /v2/admin/projects/{id}/secrets/{name}',
  'get /v2/admin/projects/{id}/secrets',
  'delete /v2/admin/projects/{id}/secrets/{name}',
  'get /v2/admin/projects/{id}/environments',
  'get /v2/admin/projects/{id}/forge-issues/{number}',
  'delete /v2/admin/projects/{id}/environments',
  'delete /v2/admin/projects/{id}/environments/{key}',
  'post /v2/admin/projects/{id}/environments/rebuild',
  'post /v2/forges/{projectId}/webhook',
];

/**
 * The published document is OpenAPI 3.0: `nullable` instead of a null type, and references to
 * its components. This gives the plain JSON Schema (draft-07) that ajv reads.
 */
function fromOpenApi30(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(fromOpenApi30);
  if (typeof schema !== 'object' || schema === null) return schema;
  const s = schema as Json;
  if (typeof s.$ref === 'string') {
    const name = s.$ref.replace('#/components/schemas/', '');
    const target = published.components.schemas[name];
    assert.ok(target, `the published document has no ${s.$ref}`);
    return fromOpenApi30(target);
  }
  const out: Json = {};
  for (const [key, value] of Object.entries(s)) {
    if (key === 'nullable' || key === 'example') continue;
    out[key] = key === 'properties' ? mapValues(value as Json) : fromOpenApi30(value);
  }
  return s.nullable === true ? { anyOf: [out, { type: 'null' }] } : out;
}

function mapValues(properties: Json): Json {
  return Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, fromOpenApi30(v)]));
}

const ajv07 = new Ajv({ strict: false, allErrors: true });
addFormats(ajv07);
const ajv2020 = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv2020);

function assertValid(
  ajv: Ajv | Ajv2020,
  schema: unknown,
  value: unknown,
  what: string,
  text: string,
): void {
  const validate = ajv.compile(schema as AnySchema);
  assert.ok(
    validate(value),
    `${what}: ${ajv.errorsText(validate.errors)}\nresponse: ${text.slice(0, 2000)}`,
  );
}

function operation(doc: Document, key: string): Operation {
  const [method, path] = key.split(' ') as [Method, string];
  const op = doc.paths[path]?.[method];
  assert.ok(op, `${key} is not in the document`);
  return op;
}

/**
 * Asserts that a real response is what Errand's document says for its route and status: the
 * status is documented, and a JSON body validates against the documented schema.
 */
function assertDocumented(doc: Document, key: string, res: HttpResult): void {
  const documented = operation(doc, key).responses[String(res.status)];
  assert.ok(documented, `${key} answered ${res.status}, which it does not document`);
  if (res.status === 304) return;
  // No body (a 204): documented with no content.
  if (res.text === '' && !res.headers.get('content-type')) {
    assert.equal(documented.content, undefined, `${key} ${res.status} documents a body`);
    return;
  }
  const type = (res.headers.get('content-type') ?? '').split(';')[0] ?? '';
  const content = documented.content?.[type];
  assert.ok(content, `${key} ${res.status} sent ${type}, which it does not document`);
  if (type === 'application/json')
    assertValid(
      ajv2020,
      inlineRefs(doc, content.schema),
      res.json,
      `${key} ${res.status}`,
      res.text,
    );
}

describe('OpenAPI document', () => {
  let svc: TestService;
  let fx: RouteFixture;
  let doc: Document;

  before(async () => {
    // The secret key lets the webhook routes store a signing secret.
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'openapi-test-secret-key' },
    });
    fx = await createRouteFixture(svc);
    const res = await svc.request('GET', '/openapi.json', { key: null });
    assert.equal(res.status, 200, res.text);
    doc = JSON.parse(res.text) as Document;
  });
  after(async () => {
    await svc?.close();
  });

  test('served without a key, as OpenAPI 3.1 that a validator accepts', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  });

  test('documents every route Errand serves, and only those', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    assert.deepEqual(documented.sort(), [...ERRAND_OPERATIONS].sort());
    for (const key of ERRAND_OPERATIONS) {
      const op = operation(doc, key);
      const path = key.split(' ')[1] ?? '';
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
      assert.deepEqual(declared.sort(), inPath.sort(), `${key}: path parameters`);
    }
  });

  test('the job and the error are components, named as in the published document; the admin records ones of their own', () => {
    for (const name of ['AgentJob', 'Error']) {
      assert.ok(published.components.schemas[name], `the published document has no ${name}`);
      assert.ok(doc.components?.schemas?.[name], `Errand's document has no ${name}`);
    }
    // Only components a path refers to: no unused copies.
    assert.deepEqual(Object.keys(doc.components?.schemas ?? {}).sort(), [
      'AgentJob',
      'AuditEntry',
      'Environment',
      'Error',
      'EvalRun',
      'EvalRunSummary',
      'ForgeIssue',
      'Key',
      'Project',
      'ProjectRole',
      'Schedule',
      'Secret',
      'User',
      'Webhook',
    ]);
    const created = operation(doc, 'post /v2/agent/{projectId}/job').responses['201'];
    assert.deepEqual(created?.content?.['application/json']?.schema, {
      $ref: '#/components/schemas/AgentJob',
    });
    // Each answer that is one such record refers to its component, described as before.
    for (const [route, status, description, component] of [
      ['post /v2/admin/projects', '201', 'The new project.', 'Project'],
      ['get /v2/admin/projects/{id}', '200', 'The project.', 'Project'],
      ['patch /v2/admin/projects/{id}', '200', 'The project as it is now.', 'Project'],
      ['post /v2/admin/keys/{id}/revoke', '200', 'The revoked key.', 'Key'],
      [
        'get /v2/admin/projects/{projectId}/webhooks/{webhookId}',
        '200',
        'The endpoint, without its secret.',
        'Webhook',
      ],
      ['put /v2/admin/projects/{id}/secrets/{name}', '201', 'Created.', 'Secret'],
      [
        'get /v2/admin/projects/{projectId}/schedules/{scheduleId}',
        '200',
        'The schedule, with its last firing.',
        'Schedule',
      ],
      [
        'put /v2/admin/projects/{id}/roles/{granteeKind}/{grantee}',
        '200',
        'The role.',
        'ProjectRole',
      ],
      ['post /v2/admin/users/{id}/deactivate', '200', 'The user.', 'User'],
      ['get /v2/admin/projects/{id}/forge-issues/{number}', '200', 'The issue.', 'ForgeIssue'],
    ] as const) {
      const answer = operation(doc, route).responses[status];
      assert.equal(answer?.description, description, route);
      assert.deepEqual(
        answer?.content?.['application/json']?.schema,
        { $ref: `#/components/schemas/${component}` },
        route,
      );
    }
  });

  test("the events endpoint and the webhook payloads are the event catalog's, type by type", () => {
    /** The one value a schema allows (a literal is `const`, or an `enum` of one). */
    const only = (schema: unknown) => {
      const s = (schema ?? {}) as { const?: unknown; enum?: unknown[] };
      return s.const ?? (s.enum?.length === 1 ? s.enum[0] : undefined);
    };
    type Properties = { properties: Record<string, Json & Partial<Properties>> };
    const listed = operation(doc, 'get /v2/agent/{projectId}/job/{id}/events').responses['200'];
    const page = listed?.content?.['application/json']?.schema as {
      properties: { events: { items: { oneOf: Properties[] } } };
    };
    assert.deepEqual(
      page.properties.events.items.oneOf.map((event) => only(event.properties.type)),
      [...LOGGED_EVENT_TYPES],
    );
    const webhooks = (doc as Document & { webhooks?: Record<string, { post: Operation }> })
      .webhooks;
    assert.deepEqual(Object.keys(webhooks ?? {}), [...WEBHOOK_EVENT_TYPES]);
    for (const [type, hook] of Object.entries(webhooks ?? {})) {
      const body = hook.post.requestBody?.content['application/json']?.schema as Properties;
      assert.equal(only(body.properties.type), type);
      const data = body.properties.data?.properties ?? {};
      assert.equal(data.job?.$ref, '#/components/schemas/AgentJob', type);
      assert.equal(only(data.event?.properties?.type), type);
    }
  });

  test('has every published path and method, with the same path parameters', () => {
    for (const [path, ops] of Object.entries(published.paths)) {
      for (const [method, publishedOp] of Object.entries(ops) as [Method, Operation][]) {
        const op = operation(doc, `${method} ${path}`);
        const names = (o: Operation) =>
          (o.parameters ?? [])
            .filter((p) => p.in === 'path')
            .map((p) => p.name)
            .sort();
        assert.deepEqual(names(op), names(publishedOp), `${method} ${path}`);
        for (const status of Object.keys(publishedOp.responses)) {
          assert.ok(op.responses[status], `${method} ${path} does not document ${status}`);
        }
      }
    }
  });

  test('accepts every request body the published schema accepts', async () => {
    const prompts = ['x', 'Fix the typo in README.md', 'é'.repeat(500), '{"a": [1, 2]}\n\tdone'];
    const create = operation(published, 'post /v2/agent/{projectId}/job');
    const message = operation(published, 'post /v2/agent/{projectId}/job/{id}/message');
    const createSchema = fromOpenApi30(create.requestBody?.content['application/json']?.schema);
    const messageSchema = fromOpenApi30(message.requestBody?.content['application/json']?.schema);
    for (const prompt of prompts) {
      const body = { prompt };
      assertValid(ajv07, createSchema, body, 'published create body', JSON.stringify(body));
      assertValid(ajv07, messageSchema, body, 'published message body', JSON.stringify(body));
      const created = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
        key: fx.projectKey,
        body,
      });
      assert.equal(created.status, 201, created.text);
      const sent = await svc.request(
        'POST',
        `/v2/agent/${fx.project.id}/job/${created.json.id}/message`,
        { key: fx.projectKey, body },
      );
      assert.equal(sent.status, 200, sent.text);
    }
  });

  test('every documented success response validates against the published schema', async () => {
    const created = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
      key: fx.projectKey,
      body: { prompt: 'published shape' },
    });
    const base = `/v2/agent/${fx.project.id}/job/${created.json.id}`;
    const read = await svc.request('GET', base, { key: fx.projectKey });
    const sent = await svc.request('POST', `${base}/message`, {
      key: fx.projectKey,
      body: { prompt: 'and again' },
    });
    const archived = await svc.request('POST', `${base}/archive`, { key: fx.projectKey });
    const readArchived = await svc.request('GET', base, { key: fx.projectKey });
    const notFound = await svc.request('GET', `${base}x`, { key: fx.projectKey });
    const checks: [string, HttpResult, number][] = [
      ['post /v2/agent/{projectId}/job', created, 201],
      ['get /v2/agent/{projectId}/job/{id}', read, 200],
      ['post /v2/agent/{projectId}/job/{id}/message', sent, 200],
      ['get /v2/agent/{projectId}/job/{id}', readArchived, 200],
      ['get /v2/agent/{projectId}/job/{id}', notFound, 404],
    ];
    assert.equal(archived.status, 200, archived.text);
    assert.equal(readArchived.json.status, 'archived');
    for (const [key, res, status] of checks) {
      assert.equal(res.status, status, `${key}: ${res.text}`);
      const schema = operation(published, key).responses[String(status)]?.content?.[
        'application/json'
      ]?.schema;
      assert.ok(schema, `the published ${key} has no ${status} schema`);
      assertValid(ajv07, fromOpenApi30(schema), res.json, `published ${key} ${status}`, res.text);
      assertDocumented(doc, key, res);
    }
  });

  test("every route's real responses are what Errand's document says", async () => {
    const project = fx.project.id;
    const jobId = await createJobId(svc, project, 'documented');
    const job = `/v2/agent/${project}/job/${jobId}`;
    const admin = { key: svc.adminKey };
    const own = { key: fx.projectKey };
    const read = await svc.request('GET', job, own);
    const calls: [string, () => Promise<HttpResult>][] = [
      ['get /healthz', () => svc.request('GET', '/healthz', { key: null })],
      ['get /readyz', () => svc.request('GET', '/readyz', { key: null })],
      [
        'get /review/{jobId}',
        async () => {
          const { review_token } = await svc.service.ctx.db
            .selectFrom('jobs')
            .select('review_token')
            .where('id', '=', jobId)
            .executeTakeFirstOrThrow();
          return svc.request('GET', `/review/${jobId}?token=${review_token}`, { key: null });
        },
      ],
      ['get /review/{jobId}', () => svc.request('GET', `/review/${jobId}`, { key: null })],
      [
        'get /review/{jobId}',
        () =>
          svc.request('GET', `/review/${jobId}`, { key: null, headers: { accept: 'text/html' } }),
      ],
      [
        'get /review/{jobId}',
        () => svc.request('GET', `/review/${jobId}?token=a&token=b`, { key: null }),
      ],
      ['get /v2/agent/{projectId}/job/{id}', async () => read],
      [
        'get /v2/agent/{projectId}/job/{id}',
        () =>
          svc.request('GET', job, {
            ...own,
            headers: { 'if-none-match': read.headers.get('etag') ?? '' },
          }),
      ],
      ['get /v2/agent/{projectId}/job/{id}', () => svc.request('GET', job, { key: null })],
      [
        'get /v2/agent/{projectId}/job/{id}',
        () => svc.request('GET', job, { key: fx.otherProjectKey }),
      ],
      [
        'get /v2/agent/{projectId}/jobs',
        () => svc.request('GET', `/v2/agent/${project}/jobs?limit=2`, own),
      ],
      [
        'get /v2/agent/{projectId}/jobs',
        () => svc.request('GET', `/v2/agent/${project}/jobs?limit=0`, own),
      ],
      ['get /v2/agent/{projectId}/job/{id}/events', () => svc.request('GET', `${job}/events`, own)],
      [
        'get /v2/agent/{projectId}/job/{id}/events',
        () => svc.request('GET', `${job}/events?after=-1`, own),
      ],
      [
        'post /v2/agent/{projectId}/job',
        () => svc.request('POST', `/v2/agent/${project}/job`, { ...own, body: { prompt: ' ' } }),
      ],
      [
        'post /v2/agent/{projectId}/job',
        () =>
          svc.request('POST', `/v2/agent/${project}/job`, {
            ...own,
            rawBody: 'prompt=x',
            headers: { 'content-type': 'text/plain' },
          }),
      ],
      ['get /v2/admin/projects', () => svc.request('GET', '/v2/admin/projects', admin)],
      ['get /v2/admin/projects', () => svc.request('GET', '/v2/admin/projects', own)],
      [
        'get /v2/admin/projects/{id}',
        () => svc.request('GET', `/v2/admin/projects/${project}`, admin),
      ],
      [
        'post /v2/admin/projects',
        () =>
          svc.request('POST', '/v2/admin/projects', {
            ...admin,
            body: { name: 'documented', repository: 'https://github.com/acme/app.git' },
          }),
      ],
      [
        'post /v2/admin/projects',
        () => svc.request('POST', '/v2/admin/projects', { ...admin, body: { name: 'x' } }),
      ],
      [
        'patch /v2/admin/projects/{id}',
        () =>
          svc.request('PATCH', `/v2/admin/projects/${fx.otherProject.id}`, {
            ...admin,
            body: { draftPullRequests: true },
          }),
      ],
      ['get /v2/admin/keys', () => svc.request('GET', '/v2/admin/keys', admin)],
      ['get /v2/admin/audit', () => svc.request('GET', '/v2/admin/audit', admin)],
      ['get /v2/admin/audit', () => svc.request('GET', '/v2/admin/audit?since=yesterday', admin)],
      [
        'post /v2/admin/keys',
        () => svc.request('POST', '/v2/admin/keys', { ...admin, body: { projectId: project } }),
      ],
      [
        'post /v2/admin/keys/{id}/revoke',
        () => svc.request('POST', `/v2/admin/keys/${fx.spareKeyId}/revoke`, admin),
      ],
      ['get /v2/admin/users', () => svc.request('GET', '/v2/admin/users', admin)],
      [
        'post /v2/admin/users/{id}/deactivate',
        () => svc.request('POST', '/v2/admin/users/usr_00000000000000000000/deactivate', admin),
      ],
      [
        'post /v2/admin/users/{id}/reactivate',
        () => svc.request('POST', '/v2/admin/users/usr_00000000000000000000/reactivate', admin),
      ],
      [
        'put /v2/admin/projects/{id}/roles/{granteeKind}/{grantee}',
        () =>
          svc.request('PUT', `/v2/admin/projects/${project}/roles/group/ops`, {
            ...admin,
            body: { role: 'viewer' },
          }),
      ],
      [
        'get /v2/admin/projects/{id}/roles',
        () => svc.request('GET', `/v2/admin/projects/${project}/roles`, admin),
      ],
      [
        'delete /v2/admin/projects/{id}/roles/{granteeKind}/{grantee}',
        () => svc.request('DELETE', `/v2/admin/projects/${project}/roles/group/ops`, admin),
      ],
    ];
    const statuses: string[] = [];
    for (const [key, call] of calls) {
      const res = await call();
      statuses.push(`${key} ${res.status}`);
      assertDocumented(doc, key, res);
    }
    // Archive last: the job's other calls above expect it active.
    const archived = await svc.request('POST', `${job}/archive`, own);
    assertDocumented(doc, 'post /v2/agent/{projectId}/job/{id}/archive', archived);
    const message = await svc.request('POST', `${job}/message`, {
      ...own,
      body: { prompt: 'x' },
    });
    assertDocumented(doc, 'post /v2/agent/{projectId}/job/{id}/message', message);
    statuses.push(`archive ${archived.status}`, `message ${message.status}`);
    // The calls reached the statuses they were written for (a 2xx, a 304 and each error).
    for (const expected of [
      'healthz 200',
      'readyz 200',
      'review/{jobId} 200',
      'review/{jobId} 404',
      'review/{jobId} 400',
      'job/{id} 304',
      'job/{id} 401',
      'job/{id} 403',
      'jobs 400',
      'events 400',
      'job 400',
      'job 415',
      'projects 403',
      'projects 201',
      'projects 400',
      'archive 200',
      'message 409',
    ]) {
      assert.ok(
        statuses.some((s) => s.endsWith(expected)),
        `no call answered ${expected}: ${statuses.join(', ')}`,
      );
    }
  });

  test("the forge webhook routes' real responses are what Errand's document says", async () => {
    const admin = { key: svc.adminKey };
    const created = await svc.request('POST', '/v2/admin/projects', {
      ...admin,
      body: { name: 'on github', repository: 'https://github.com/acme/app.git' },
    });
    const github = created.json.id ?? '';
    const made = await svc.request(
      'POST',
      `/v2/admin/projects/${github}/forge-webhook-secret`,
      admin,
    );
    assertDocumented(doc, 'post /v2/admin/projects/{id}/forge-webhook-secret', made);
    assert.equal(made.status, 200, made.text);
    // The fixture's project is on plain git: no webhook secret for it.
    const refused = await svc.request(
      'POST',
      `/v2/admin/projects/${fx.project.id}/forge-webhook-secret`,
      admin,
    );
    assertDocumented(doc, 'post /v2/admin/projects/{id}/forge-webhook-secret', refused);
    assert.equal(refused.status, 400, refused.text);
    const secret = String((made.json as Json).secret);
    const deliver = (body: string, signature: string | undefined) =>
      svc.request('POST', `/v2/forges/${github}/webhook`, {
        key: null,
        rawBody: body,
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'ping',
          'x-github-delivery': 'documented-ping',
          ...(signature === undefined ? {} : { 'x-hub-signature-256': signature }),
        },
      });
    const ping = '{"zen":"Practicality beats purity.","hook_id":1}';
    const signed = await deliver(
      ping,
      `sha256=${createHmac('sha256', secret).update(ping).digest('hex')}`,
    );
    assertDocumented(doc, 'post /v2/forges/{projectId}/webhook', signed);
    assert.equal(signed.status, 200, signed.text);
    const unsigned = await deliver(ping, undefined);
    assertDocumented(doc, 'post /v2/forges/{projectId}/webhook', unsigned);
    assert.equal(unsigned.status, 401, unsigned.text);
    const notJson = await deliver(
      'zen',
      `sha256=${createHmac('sha256', secret).update('zen').digest('hex')}`,
    );
    assertDocumented(doc, 'post /v2/forges/{projectId}/webhook', notJson);
    assert.equal(notJson.status, 400, notJson.text);
  });

  test("the webhook routes' real responses are what Errand's document says", async () => {
    const admin = { key: svc.adminKey };
    const hooks = `/v2/admin/projects/${fx.project.id}/webhooks`;
    const created = await svc.request('POST', hooks, {
      ...admin,
      body: { url: 'https://93.184.215.14/hook', events: ['job.completed'] },
    });
    const hook = `${hooks}/${created.json.id}`;
    const base = '/v2/admin/projects/{projectId}/webhooks';
    const calls: [string, number, () => Promise<HttpResult>][] = [
      [`post ${base}`, 201, async () => created],
      [
        `post ${base}`,
        400,
        () => svc.request('POST', hooks, { ...admin, body: { url: 'http://x' } }),
      ],
      [`get ${base}`, 200, () => svc.request('GET', hooks, admin)],
      [`get ${base}`, 403, () => svc.request('GET', hooks, { key: fx.projectKey })],
      [`get ${base}/{webhookId}`, 200, () => svc.request('GET', hook, admin)],
      [`get ${base}/{webhookId}`, 404, () => svc.request('GET', `${hook}x`, admin)],
      [
        `patch ${base}/{webhookId}`,
        200,
        () => svc.request('PATCH', hook, { ...admin, body: { description: 'documented' } }),
      ],
      [`patch ${base}/{webhookId}`, 400, () => svc.request('PATCH', hook, { ...admin, body: {} })],
      [
        `post ${base}/{webhookId}/rotate-secret`,
        200,
        () => svc.request('POST', `${hook}/rotate-secret`, admin),
      ],
      [
        `get ${base}/{webhookId}/deliveries`,
        200,
        () => svc.request('GET', `${hook}/deliveries?limit=5`, admin),
      ],
      [
        `get ${base}/{webhookId}/deliveries`,
        400,
        () => svc.request('GET', `${hook}/deliveries?limit=0`, admin),
      ],
      [
        `post ${base}/{webhookId}/deliveries/{deliveryId}/redeliver`,
        404,
        () => svc.request('POST', `${hook}/deliveries/msg_AAAAAAAAAAAAAAAAAAAA/redeliver`, admin),
      ],
      [`delete ${base}/{webhookId}`, 204, () => svc.request('DELETE', hook, admin)],
      [`delete ${base}/{webhookId}`, 404, () => svc.request('DELETE', hook, admin)],
    ];
    for (const [key, status, call] of calls) {
      const res = await call();
      assert.equal(res.status, status, `${key}: ${res.text}`);
      assertDocumented(doc, key, res);
    }
  });

  test("the schedule routes' real responses are what Errand's document says", async () => {
    const admin = { key: svc.adminKey };
    const list = `/v2/admin/projects/${fx.project.id}/schedules`;
    const created = await svc.request('POST', list, {
      ...admin,
      body: { cron: '0 6 * * 1', prompt: 'documented', paused: true },
    });
    const one = `${list}/${created.json.id}`;
    const base = '/v2/admin/projects/{projectId}/schedules';
    const calls: [string, number, () => Promise<HttpResult>][] = [
      [`post ${base}`, 201, async () => created],
      [
        `post ${base}`,
        400,
        () => svc.request('POST', list, { ...admin, body: { cron: 'often', prompt: 'x' } }),
      ],
      [`get ${base}`, 200, () => svc.request('GET', list, admin)],
      [`get ${base}`, 403, () => svc.request('GET', list, { key: fx.projectKey })],
      [`get ${base}/{scheduleId}`, 200, () => svc.request('GET', one, admin)],
      [`get ${base}/{scheduleId}`, 404, () => svc.request('GET', `${one}x`, admin)],
      [
        `patch ${base}/{scheduleId}`,
        200,
        () => svc.request('PATCH', one, { ...admin, body: { name: 'documented' } }),
      ],
      [`patch ${base}/{scheduleId}`, 400, () => svc.request('PATCH', one, { ...admin, body: {} })],
      [`delete ${base}/{scheduleId}`, 204, () => svc.request('DELETE', one, admin)],
      [`delete ${base}/{scheduleId}`, 404, () => svc.request('DELETE', one, admin)],
    ];
    for (const [key, status, call] of calls) {
      const res = await call();
      assert.equal(res.status, status, `${key}: ${res.text}`);
      assertDocumented(doc, key, res);
    }
  });
});

describe('API reference page and /metrics', () => {
  // This service serves /metrics on the API's port, which the document then describes.
  const METRICS_TOKEN = 'metrics-token-for-the-openapi-test';
  let svc: TestService;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_METRICS_TOKEN: METRICS_TOKEN },
    });
  });
  after(async () => {
    await svc?.close();
  });

  test('/docs is served without a key, from this server only, under a strict CSP', async () => {
    const page = await fetch(`${svc.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.equal(csp, DOCS_CSP);
    assert.doesNotMatch(csp, /unsafe-eval/);
    assert.match(csp, /(^|; )script-src 'self'(;|$)/);
    assert.match(csp, /(^|; )default-src 'none'(;|$)/);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
    assert.ok(
      assets.some((a) => a.endsWith('swagger-ui-bundle.js')),
      html,
    );
    for (const asset of assets) {
      // Every script and style comes from this server: nothing from a CDN.
      assert.match(asset, /^\/docs\//, `${asset} is not served by Errand`);
      const res = await fetch(`${svc.url}${asset}`);
      assert.equal(res.status, 200, `${asset}: ${res.status}`);
      assert.equal(res.headers.get('content-security-policy'), DOCS_CSP, asset);
      await res.arrayBuffer();
    }
  });

  test('the page reads the same document as /openapi.json', async () => {
    const [fromDocs, served] = await Promise.all([
      svc.request('GET', '/docs/json', { key: null }),
      svc.request('GET', '/openapi.json', { key: null }),
    ]);
    assert.equal(fromDocs.status, 200);
    assert.deepEqual(JSON.parse(fromDocs.text), JSON.parse(served.text));
    const initializer = await fetch(`${svc.url}/docs/static/swagger-initializer.js`);
    assert.match(await initializer.text(), /resolveUrl\('\.\/json'\)/);
  });

  test('/metrics, where it is served, is in the document, and its answers are as documented', async () => {
    const res = await svc.request('GET', '/openapi.json', { key: null });
    const doc = JSON.parse(res.text) as Document;
    const op = operation(doc, 'get /metrics');
    assert.deepEqual(op.security, [{ metricsToken: [] }]);
    const served = await svc.request('GET', '/metrics', { key: METRICS_TOKEN });
    assert.equal(served.status, 200, served.text);
    assertDocumented(doc, 'get /metrics', served);
    const refused = await svc.request('GET', '/metrics', { key: null });
    assert.equal(refused.status, 401, refused.text);
    assertDocumented(doc, 'get /metrics', refused);
  });
});
