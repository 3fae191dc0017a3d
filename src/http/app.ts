// The HTTP API: Fastify with one error mapping, authentication hooks and one file per route.
// What the entry serves beside the API (the dashboard and its review page) comes in as plugins,
// and the features' routes (src/features/) as ApiRoutes, so this layer knows nothing of them.
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { randomBase62 } from '../ids.ts';
import { checkAccessRules, markOpen } from '../keys/route-access.ts';
import { KeyChecker } from '../keys/service.ts';
import { registerMetricsRoute } from '../metrics/http.ts';
import { TokenChecker } from '../users/tokens.ts';
import { AuthorizedJobReader, requireKey, requireProject } from './auth.ts';
import { ClientErrors, requireHost, serverOptions } from './connections.ts';
import { errorHandler, sendError } from './errors.ts';
import { checkBody } from './nul.ts';
import { observeResponse } from './observe.ts';
import { registerDocs, registerOpenApi } from './openapi.ts';
import { registerAdminAuditRoute } from './routes/admin-audit.ts';
import { registerAdminEnvironmentRoutes } from './routes/admin-environments.ts';
import { registerAdminForgeIssueRoute } from './routes/admin-forge-issues.ts';
import { registerAdminKeyRoutes } from './routes/admin-keys.ts';
import { registerAdminProjectRoutes } from './routes/admin-projects.ts';
import { registerAdminSecretRoutes } from './routes/admin-secrets.ts';
import { registerAdminUserRoutes } from './routes/admin-users.ts';
import { registerArchiveJob } from './routes/archive-job.ts';
import { registerCreateJob } from './routes/create-job.ts';
import { registerGetJob } from './routes/get-job.ts';
import { registerHealth } from './routes/health.ts';
import { registerListJobs } from './routes/list-jobs.ts';
import { registerSendMessage } from './routes/send-message.ts';
import { serializerCompiler, validatorCompiler } from './schemas.ts';

/**
 * A part of the service served beside the API, registered in a scope of its own: it gets the
 * context, and the app's error mapping for what it throws.
 */
export type AppPlugin = FastifyPluginAsync<{ ctx: AppContext }>;

/**
 * A feature's API routes (src/features/), handed in by the entry: the features sit above this
 * layer and use its helpers, so it registers them without importing them. Each hook runs in
 * the scope whose authentication its routes need.
 */
export interface ApiRoutes {
  /** Routes no API key opens (a forge's signed webhook requests): their own check stands in. */
  open?(app: FastifyInstance, ctx: AppContext): Promise<void>;
  /** Routes of a project (its `projectId` path parameter), for a key that may act on it. */
  project?(scope: FastifyInstance, ctx: AppContext): void;
  /** Routes for the admin key, in its scope. */
  admin?(scope: FastifyInstance, ctx: AppContext): void;
  /**
   * Ends what the feature holds open past a request (the live stream's responses), first when
   * the server stops: an open response would keep the server from closing.
   */
  close?(): Promise<void>;
}

export async function buildApp(
  ctx: AppContext,
  plugins: readonly AppPlugin[] = [],
  features: readonly ApiRoutes[] = [],
): Promise<FastifyInstance> {
  const requestPrefix = randomBase62(10);
  let nextRequest = 0;
  // A random prefix per process and a counter: unique, and no CSPRNG call per request.
  const nextId = () => `req_${requestPrefix}${(nextRequest++).toString(36).padStart(6, '0')}`;
  const clientErrors = new ClientErrors(nextId, ctx.config.httpTimeouts, ctx.log);
  const app = Fastify({
    logger: false,
    // Room for the largest allowed prompt in UTF-8 plus JSON escaping.
    bodyLimit: Math.max(1024 * 1024, ctx.config.maxPromptChars * 6 + 4096),
    genReqId: nextId,
    // Fastify's own 503 while closing has a body of its own: the preClose and onRequest hooks
    // below answer in Errand's shape instead.
    return503OnClosing: false,
    ...serverOptions(ctx.config.httpTimeouts),
    clientErrorHandler: clientErrors.onClientError,
    frameworkErrors: clientErrors.onFrameworkError,
  });
  clientErrors.attach(app.server);
  // Only JSON bodies are accepted; Fastify's default text/plain parser would let other
  // content types through to validation instead of a 415.
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('principal', null);
  app.decorateRequest('project', null);
  // A callback hook, not an async one: it runs on every response, and a promise per response
  // shows in the polling benchmark.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('X-Request-Id', request.id);
    done(null, payload);
  });
  app.addHook('onResponse', observeResponse(ctx));
  app.addHook('onRequest', requireHost);
  // While the server drains (a stop), a request that still arrives on an open connection is
  // sent elsewhere; Fastify closes the connection after the answer.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    // What the features hold open (the live event streams) would hold the server open: it ends
    // first, and the streams' clients reconnect. Connections with no request in flight end too.
    void Promise.all(features.map((feature) => feature.close?.())).then(() => {
      clientErrors.closeIdle();
      done();
    });
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!closing) done();
    else done(new AppError('unavailable', 'this server is shutting down; try again'));
  });
  app.addHook('preValidation', checkBody);
  app.setErrorHandler(errorHandler(ctx));
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      request,
      new AppError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`),
    ),
  );

  // Every route declares who may call it; the server does not start with one that does not.
  checkAccessRules(app);
  await registerOpenApi(app);
  const keys = new KeyChecker(ctx.db, (err) => ctx.log.warn({ err }, 'could not record key use'));
  const tokens = new TokenChecker(ctx, (err) =>
    ctx.log.warn({ err }, 'could not record token use'),
  );
  await registerHealth(app, ctx);
  registerMetricsRoute(app, ctx.config, ctx.metrics);
  registerGetJob(app, new AuthorizedJobReader(ctx, keys, tokens));
  // No API key: each checks its requests its own way (the forge intake: the forge's signature).
  for (const feature of features) await feature.open?.(app, ctx);
  // Here, not after the API's routes: the review page keeps its place in the OpenAPI document.
  for (const plugin of plugins) await app.register(plugin, { ctx });
  await app.register(async (scope) => {
    scope.addHook('onRequest', requireProject(ctx, keys, tokens));
    registerCreateJob(scope, ctx);
    registerSendMessage(scope, ctx);
    registerListJobs(scope, ctx);
    registerArchiveJob(scope, ctx);
    for (const feature of features) feature.project?.(scope, ctx);
  });
  await app.register(async (scope) => {
    scope.addHook('onRequest', requireKey(keys, tokens));
    registerAdminProjectRoutes(scope, ctx);
    registerAdminKeyRoutes(scope, ctx);
    registerAdminUserRoutes(scope, ctx);
    for (const feature of features) feature.admin?.(scope, ctx);
    registerAdminSecretRoutes(scope, ctx);
    registerAdminEnvironmentRoutes(scope, ctx);
    registerAdminForgeIssueRoute(scope, ctx);
    registerAdminAuditRoute(scope, ctx);
  });
  // The API's document and its viewer: public, as they always were.
  await app.register(async (docs) => {
    docs.addHook('onRoute', markOpen);
    await registerDocs(docs);
  });
  return app;
}
