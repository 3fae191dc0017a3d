// Authentication for every /v2 route, then the route's access rule (http/access.ts). Runs at
// onRequest, before the body is read, so an unauthenticated caller learns nothing about the
// body's validity. The order of refusals, 401, then 403, then 404, is keys/access.ts's.
import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import { Batcher } from '../db/batch.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError, databaseUnavailable } from '../errors.ts';
import { isId } from '../ids.ts';
import { JOB_VIEW_COLUMNS, type JobView } from '../jobs/record.ts';
import { requireAccess } from '../keys/access.ts';
import { isTokenLike } from '../keys/format.ts';
import { enforceAccess } from '../keys/route-access.ts';
import { bearerOf, type KeyChecker, type Principal, type UserPrincipal } from '../keys/service.ts';
import { PROJECT_COLUMNS } from '../projects/service.ts';
import type { TokenChecker } from '../users/tokens.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    project: ProjectRow | null;
  }
}

/** What a read-only token may do: read. */
const READ_METHODS = new Set(['GET', 'HEAD']);

/**
 * The principal of a personal API token, or undefined when the credential is a key (which the
 * caller's own query checks): routed by the prefix, so a key costs no token lookup. The one
 * place a read-only token is refused a request that is not a read, whatever the route.
 */
async function tokenPrincipal(
  tokens: TokenChecker,
  header: string | undefined,
  method: string,
): Promise<UserPrincipal | undefined> {
  const credential = bearerOf(header);
  if (!isTokenLike(credential)) return undefined;
  const principal = await tokens.check(credential);
  if (principal.token?.readOnly && !READ_METHODS.has(method)) {
    throw new AppError(
      'forbidden',
      `this personal API token is read-only: ${method} needs a token that is not read-only`,
    );
  }
  return principal;
}

/** A valid key or token (401 otherwise) with the access the route declares (403 otherwise). */
export function requireKey(keys: KeyChecker, tokens: TokenChecker) {
  return async (request: FastifyRequest): Promise<void> => {
    const { authorization } = request.headers;
    const principal =
      (await tokenPrincipal(tokens, authorization, request.method)) ??
      (await keys.check(authorization));
    enforceAccess(request, principal);
    request.principal = principal;
  };
}

/** The key's columns of a row that reads the key together with a project. */
interface KeyColumns {
  key_id: string | null;
  key_project: string | null;
  key_revoked_at: Date | null;
}

/** What a principal must be allowed, after it is known: the route's access rule. */
type Allow = (principal: Principal) => void;

/** The principal of a key read by a query, and whether the route allows it: 401, then 403. */
function authorize(keys: KeyChecker, row: KeyColumns | undefined, allow: Allow): Principal {
  const principal = keys.principalOf(
    row && { id: row.key_id, project_id: row.key_project, revoked_at: row.key_revoked_at },
  );
  allow(principal);
  return principal;
}

interface KeyAndProjectRow extends Omit<ProjectRow, 'id'>, KeyColumns {
  id: string | null;
}

/** A read that waits longer than this is answered 503 (see BatchOptions.timeout). */
const READ_TIMEOUT_MS = 10_000;

interface ProjectReadItem {
  keyHash: string;
  projectId: string;
}

// One row per item, in the items' order: the key's columns (null when there is no such key)
// with the project's (null when there is no such project).
const KEYS_AND_PROJECTS_SQL = `
  SELECT k.id AS key_id, k.project_id AS key_project, k.revoked_at AS key_revoked_at,
    ${PROJECT_COLUMNS.map((column) => `p.${column}`).join(', ')}
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(hash, project_id, i)
  LEFT JOIN api_keys k ON k.hash = r.hash
  LEFT JOIN projects p ON p.id = r.project_id
  ORDER BY r.i`;

/**
 * Checks the key and that it may act on the `projectId` path parameter, and loads the project,
 * in one query: 401, then 403, then 404. Concurrent requests share that query, as the polling
 * reads share theirs (AuthorizedJobReader): under a burst of creates it was one statement per
 * request beside a share of one transaction.
 */
export function requireProject(ctx: AppContext, keys: KeyChecker, tokens: TokenChecker) {
  const batcher = new Batcher<ProjectReadItem, KeyAndProjectRow>(
    (items) =>
      ctx.prepared<KeyAndProjectRow>('errand_keys_and_projects', KEYS_AND_PROJECTS_SQL, [
        items.map((item) => item.keyHash),
        items.map((item) => item.projectId),
      ]),
    // Two at a time: a request that arrives while one read is out joins the next, which need not
    // wait for the first to come back (one at a time cost creates about 5 % of their rate).
    { maxItems: 500, maxInFlight: 2, timeout: { ms: READ_TIMEOUT_MS, error: databaseUnavailable } },
  );
  return async (request: FastifyRequest<{ Params: { projectId: string } }>): Promise<void> => {
    const { authorization } = request.headers;
    const { projectId } = request.params;
    // A token is checked by its own query first; the shared read then looks up no key ('').
    const token = await tokenPrincipal(tokens, authorization, request.method);
    if (token) enforceAccess(request, token);
    const row = await batcher.submit({
      keyHash: token ? '' : keys.hashOf(authorization),
      // Only well-formed ids reach the statement: one bad value would fail every read with it.
      projectId: isId('prj', projectId) ? projectId : '',
    });
    const principal = token ?? authorize(keys, row, (p) => enforceAccess(request, p));
    if (!row.id) throw new AppError('not_found', `project ${projectId} not found`);
    const { key_id, key_project, key_revoked_at, ...project } = row;
    request.principal = principal;
    request.project = { ...project, id: row.id };
  };
}

/** The job's columns are null when `job_read` is false. */
interface KeyAndJobRow extends Omit<JobView, 'id' | 'project_id'>, KeyColumns {
  project_exists: boolean;
  job_id: string | null;
  job_version: string | null;
  /** Whether the job's columns were read: false when the caller already had this version. */
  job_read: boolean;
}

/**
 * A job's version: its row version (PostgreSQL's xmin: every update writes a new row version
 * with a new xmin) and its update time, so that an xmin reused after transaction id wraparound
 * cannot pass for an old version. An unchanged version means an unchanged job.
 */
export interface VersionedJob {
  /** Undefined when the read was given this version as known: the job has not changed. */
  job: JobView | undefined;
  version: string;
}

interface JobReadItem {
  projectId: string;
  jobId: string;
  keyHash: string;
  /** The version the caller already has rendered, or ''. */
  knownVersion: string;
}

/** The job's own columns; the read names the id itself and knows the project. */
const JOB_COLUMNS = JOB_VIEW_COLUMNS.filter((column) => column !== 'id' && column !== 'project_id');

// One row per item, in the items' order, whether or not the key, project or job exist. The
// job's columns are read only when its version differs from the one the caller knows: a poll
// of an unchanged job reads its version alone.
const READ_JOBS_SQL = `
  SELECT k.id AS key_id, k.project_id AS key_project, k.revoked_at AS key_revoked_at,
    EXISTS (SELECT 1 FROM projects p WHERE p.id = r.project_id) AS project_exists,
    j.id AS job_id, v.version AS job_version, f.job_read IS NOT NULL AS job_read,
    ${JOB_COLUMNS.map((column) => `f.${column}`).join(', ')}
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
    WITH ORDINALITY AS r(project_id, job_id, hash, known_version, i)
  LEFT JOIN api_keys k ON k.hash = r.hash
  LEFT JOIN jobs j ON j.id = r.job_id AND j.project_id = r.project_id
  LEFT JOIN LATERAL (
    SELECT j.xmin::text || '/' || (extract(epoch FROM j.updated_at) * 1000000)::bigint AS version
  ) v ON j.id IS NOT NULL
  LEFT JOIN LATERAL (
    SELECT true AS job_read, ${JOB_COLUMNS.map((column) => `j.${column}`).join(', ')}
    WHERE v.version IS DISTINCT FROM r.known_version
  ) f ON j.id IS NOT NULL
  ORDER BY r.i`;

/**
 * The polling hot path: the key, the project's existence and the job are read by one query,
 * with the same answers, in the same order of precedence, as requireProject followed by
 * getJob (401, 403, 404 project, 404 job). Concurrent reads share that query (Batcher).
 */
export class AuthorizedJobReader {
  readonly #keys: KeyChecker;
  readonly #tokens: TokenChecker;
  readonly #batcher: Batcher<JobReadItem, KeyAndJobRow>;

  constructor(
    ctx: AppContext,
    keys: KeyChecker,
    tokens: TokenChecker,
    readTimeoutMs = READ_TIMEOUT_MS,
  ) {
    this.#keys = keys;
    this.#tokens = tokens;
    // One statement in flight: the reads that arrive while it runs all go into the next one,
    // as in a group commit. In the benchmark this gave larger batches and more reads per CPU
    // second than two or more. A full batch of 500 reads takes about 6 ms on the bench machine.
    this.#batcher = new Batcher(
      (items) =>
        ctx.prepared<KeyAndJobRow>('errand_read_jobs', READ_JOBS_SQL, [
          items.map((item) => item.projectId),
          items.map((item) => item.jobId),
          items.map((item) => item.keyHash),
          items.map((item) => item.knownVersion),
        ]),
      {
        maxItems: 500,
        maxInFlight: 1,
        timeout: {
          ms: readTimeoutMs,
          error: databaseUnavailable,
        },
      },
    );
  }

  /**
   * Reads the job, or only its version when it is still `knownVersion` (then `job` is
   * undefined): the caller has it already.
   */
  async read(
    header: string | undefined,
    projectId: string,
    jobId: string,
    knownVersion?: string,
    // The route's access rule (get-job passes enforceAccess); by default a job is read by a
    // viewer of its project, as that route declares.
    allow: Allow = (principal) => requireAccess(principal, 'viewer', projectId),
  ): Promise<VersionedJob> {
    // Polling is a read: a read-only token may poll.
    const token = await tokenPrincipal(this.#tokens, header, 'GET');
    if (token) allow(token);
    const keyHash = token ? '' : this.#keys.hashOf(header);
    const row = await this.#batcher.submit({
      // Only well-formed ids reach the statement: one bad value (a NUL byte, say) would fail
      // every read batched with it.
      projectId: isId('prj', projectId) ? projectId : '',
      jobId: isId('job', jobId) ? jobId : '',
      keyHash,
      knownVersion: knownVersion ?? '',
    });
    if (!token) authorize(this.#keys, row, allow);
    if (!row.project_exists) throw new AppError('not_found', `project ${projectId} not found`);
    if (!row.job_id) throw new AppError('not_found', `job ${jobId} not found in this project`);
    const version = row.job_version ?? '';
    if (!row.job_read) return { job: undefined, version };
    const {
      key_id,
      key_project,
      key_revoked_at,
      project_exists,
      job_id,
      job_version,
      job_read,
      ...job
    } = row;
    return { job: { ...job, id: job_id, project_id: projectId }, version };
  }
}
