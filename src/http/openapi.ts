// GET /openapi.json: the OpenAPI 3.1 document, generated from the route schemas (so it cannot
// drift from what the routes accept), and GET /docs: a readable reference rendered by
// Swagger UI. Its scripts and styles are served from the package (no CDN, works offline),
// under a CSP that allows only this server's own scripts. Neither needs a key.

import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { webhookPayloadSchemas } from '../events/openapi.ts';
import { isRecord } from '../json.ts';
import { jobRecord } from '../records/job.ts';
import { errandVersion } from '../version.ts';

/** The document as the generator hands it over (an OpenAPI 3.x object). */
type OpenApiObject = ReturnType<typeof jsonSchemaTransformObject>;

/**
 * Swagger UI sets styles on elements from its script, so styles need 'unsafe-inline'; scripts
 * come only from this server, and nothing may be evaluated, framed or posted elsewhere.
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * The generator writes each component twice, as read and as written (`AgentJobInput`); Errand's
 * components are only ever sent, so the copies no path refers to are left out.
 */
function withoutUnusedSchemas(document: OpenApiObject): OpenApiObject {
  // Swagger 2 documents have no components; Errand's is OpenAPI 3.1.
  if (!('components' in document)) return document;
  const schemas = document.components?.schemas;
  if (!schemas) return document;
  const refersTo = (value: unknown, name: string) =>
    JSON.stringify(value).includes(`"#/components/schemas/${name}"`);
  const rest = { ...document, components: { ...document.components, schemas: {} } };
  for (const [name, schema] of Object.entries(schemas)) {
    const others = Object.values(schemas).filter((other) => other !== schema);
    if (!refersTo(rest, name) && !refersTo(others, name)) delete schemas[name];
  }
  return document;
}

/**
 * Components in the order of their names, not of the modules that declared them: the document,
 * and the client's types generated from it, stay the same whatever imports what first.
 */
function withSortedSchemas(document: OpenApiObject): OpenApiObject {
  if (!('components' in document)) return document;
  const schemas = document.components?.schemas;
  if (!schemas) return document;
  const entries = Object.entries(schemas).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [name] of entries) delete schemas[name];
  for (const [name, schema] of entries) schemas[name] = schema;
  return document;
}

const EVENTS_PATH = '/v2/agent/{projectId}/job/{id}/events';

/**
 * The events route also answers `text/event-stream` (the live stream), which a route schema
 * cannot say: its 200 gets that media type and the Last-Event-ID header here.
 */
function withEventStream(document: OpenApiObject): OpenApiObject {
  // Walked as plain JSON: the generator's types differ between OpenAPI versions.
  const paths: unknown = document.paths;
  const operation: unknown = isRecord(paths) ? paths[EVENTS_PATH] : undefined;
  const get: unknown = isRecord(operation) ? operation.get : undefined;
  if (!isRecord(get) || !isRecord(get.responses)) return document;
  const ok = get.responses['200'];
  if (!isRecord(ok) || !isRecord(ok.content)) return document;
  ok.content['text/event-stream'] = {
    schema: {
      type: 'string',
      description:
        'Server-Sent Events: `id: <seq>`, `event: <type>`, `data: <the event as JSON, as in the JSON answer>`, a blank line; and `: keep-alive` comments.',
    },
  };
  const parameters: unknown[] = Array.isArray(get.parameters) ? get.parameters : [];
  get.parameters = [
    ...parameters,
    {
      in: 'header',
      name: 'Last-Event-ID',
      required: false,
      schema: { type: 'string', pattern: '^[0-9]+$' },
      description: 'For the stream: resume after this seq (wins over `after`).',
    },
  ];
  return document;
}

/**
 * What a webhook endpoint receives, one entry per event type it can ask for (OpenAPI 3.1's
 * `webhooks`): the payloads of the event catalog, whose job record is the AgentJob component.
 */
function withWebhooks(document: OpenApiObject): OpenApiObject {
  const webhooks: Record<string, unknown> = {};
  for (const [type, schema] of Object.entries(webhookPayloadSchemas(jobRecord))) {
    const { $schema: _, $defs, ...body } = z.toJSONSchema(schema, { io: 'output' });
    // Schemas with an id (the job) are components of the document, as in the routes.
    const json = JSON.stringify(body).replaceAll('"#/$defs/', '"#/components/schemas/');
    const missing = Object.keys($defs ?? {}).filter(
      (id) => !('components' in document) || !document.components?.schemas?.[id],
    );
    if (missing.length > 0) throw new Error(`webhook payloads refer to ${missing.join(', ')}`);
    webhooks[type] = {
      post: {
        summary: type,
        description: `${schema.description ?? type} Signed as Standard Webhooks says (webhook-id, webhook-timestamp, webhook-signature); answer with a 2xx within ERRAND_WEBHOOK_TIMEOUT_SECONDS (10 s by default), or the delivery is tried again.`,
        requestBody: {
          required: true,
          content: { 'application/json': { schema: JSON.parse(json) } },
        },
        responses: { '2XX': { description: 'Received: the delivery is done.' } },
      },
    };
  }
  return { ...document, webhooks } as OpenApiObject;
}

/** Registers the generator; call before any route, which it records as it is added. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Errand',
        version: errandVersion(),
        description:
          'Background AI agent jobs on git repositories that end in pull requests. The job API is compatible with the Agent Job Service v2 interface; errors are {"error", "code", "requestId"}.',
      },
      tags: [
        { name: 'jobs', description: 'The job API: a project key or an admin key.' },
        { name: 'admin', description: 'Projects and keys: an admin key.' },
        {
          name: 'review',
          description:
            "Errand's review page: opened by the token in the job's review link, or by a dashboard session.",
        },
        { name: 'health', description: 'For load balancers: no key.' },
        {
          name: 'forges',
          description: "Forge webhooks in: the forge's signature with the project's secret.",
        },
        { name: 'metrics', description: 'For Prometheus: the metrics token.' },
        {
          name: 'evals',
          description:
            'Eval runs (docs/eval.md): the maintainer role on every project a suite names to start or cancel one, a role on each to read it.',
        },
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An Errand API key.' },
          metricsToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'ERRAND_METRICS_TOKEN (GET /metrics only).',
          },
        },
      },
    },
    transform: jsonSchemaTransform,
    // Schemas with an id (AgentJob, Error) become components that responses refer to.
    transformObject: (document) =>
      withWebhooks(
        withEventStream(
          withSortedSchemas(withoutUnusedSchemas(jsonSchemaTransformObject(document))),
        ),
      ),
  });
}

/** Registers /openapi.json and /docs; call after every route is registered. */
export async function registerDocs(app: FastifyInstance): Promise<void> {
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: DOCS_CSP,
    // The page reads the document from /docs/json, the same document as /openapi.json; no
    // badge from validator.swagger.io (the page must work offline).
    validatorUrl: false,
  });
}
