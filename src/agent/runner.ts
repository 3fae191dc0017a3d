// The agent pipeline behind a turn: prepare the job's checkout, run the tool loop with the
// conversation so far, then commit what changed and push the work branch. Every step is
// safe to repeat: a turn retried after a crash finds its pushed commit and does not redo it.
import type { ModelMessage } from 'ai';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { ExternalError } from '../errors.ts';
import {
  TurnFailedError,
  type TurnInput,
  type TurnOutput,
  type TurnRunner,
} from '../jobs/runner.ts';
import type { Logger } from '../log.ts';
import { gitOut } from '../workspace/git.ts';
import {
  changedFiles,
  commitAll,
  GitError,
  prepareCheckout,
  pushBranch,
  type WorkspaceConfig,
} from '../workspace/index.ts';
import { BudgetExceededError, runAgentTurn } from './loop.ts';
import { resolveModel } from './models.ts';
import { buildSystemPrompt, readRepoInstructions } from './prompt.ts';
import { scrubSecrets } from './scrub.ts';
import { createRepoTools } from './tools/index.ts';

export interface AgentRunnerDeps {
  config: Config;
  db: Db;
  log: Logger;
}

const TURN_TRAILER = 'Errand-Turn';

export function workspaceConfig(config: Config): WorkspaceConfig {
  return {
    rootDir: `${config.dataDir}/workspaces`,
    allowLocalRepos: config.allowLocalRepos,
    identity: { name: config.git.authorName, email: config.git.authorEmail },
  };
}

/** The commit message: the summary's first line as subject, the rest as body. */
export function commitMessage(summary: string, jobId: string, seq: number, prompt: string): string {
  const lines = summary.trim().split('\n');
  let subject = (lines[0] ?? '').replace(/^#+\s*/, '').trim();
  if (!subject) subject = prompt.trim().split('\n')[0] ?? 'Errand changes';
  if (subject.length > 72) subject = `${subject.slice(0, 69).trimEnd()}...`;
  const body = lines.slice(1).join('\n').trim();
  return `${subject}\n\n${body ? `${body}\n\n` : ''}${TURN_TRAILER}: ${jobId}/${seq}\n`;
}

export class AgentRunner implements TurnRunner {
  readonly #deps: AgentRunnerDeps;
  readonly #workspace: WorkspaceConfig;

  constructor(deps: AgentRunnerDeps) {
    this.#deps = deps;
    this.#workspace = workspaceConfig(deps.config);
  }

  async run(input: TurnInput): Promise<TurnOutput> {
    const { job, turn, signal } = input;
    const { config } = this.#deps;
    const scrub = (text: string) => scrubSecrets(text, config.secrets);
    const scrubbed = <T>(value: T): T => JSON.parse(scrub(JSON.stringify(value))) as T;
    // Tools of one step run in parallel; the chain keeps the log in the order events happened.
    let chain: Promise<void> = Promise.resolve();
    const emit = (type: string, data: Record<string, unknown> = {}): Promise<void> => {
      const clean = scrubbed(data);
      chain = chain.then(() => input.emit(type, clean));
      return chain;
    };

    let checkout: Awaited<ReturnType<typeof prepareCheckout>>;
    try {
      checkout = await prepareCheckout(this.#workspace, {
        projectId: job.project_id,
        jobId: job.id,
        repository: job.repository,
        ref: job.ref,
        branch: job.branch,
        signal,
      });
    } catch (err) {
      throw asTurnError(err, scrub);
    }
    await emit('workspace.ready', {
      base: checkout.baseCommit,
      head: checkout.headCommit,
      continued: checkout.branchExisted,
    });

    // A retry after a crash between push and recording the turn: the work already landed.
    const landed = await this.#landedCommit(checkout.dir, job.id, turn.seq, signal);
    if (landed) {
      await emit('turn.resumed', { commit: landed.sha, note: 'this turn was already pushed' });
      return { summary: landed.summary, messages: null, commitSha: landed.sha, usage: null };
    }

    const model = resolveModel(job.model, config.models);
    const history = await this.#history(job.id, turn.seq);
    const repoInstructions = await readRepoInstructions(checkout.dir);
    const system = buildSystemPrompt({
      ...(repoInstructions ? { repoInstructions } : {}),
      repository: job.repository,
      branch: job.branch,
    });
    const tools = createRepoTools({ root: checkout.dir, signal });
    let result: Awaited<ReturnType<typeof runAgentTurn>>;
    try {
      result = await runAgentTurn({
        model,
        system,
        history,
        prompt: turn.prompt,
        tools,
        budgets: {
          maxSteps: config.agent.maxSteps,
          maxOutputTokens: config.agent.maxOutputTokens,
          timeoutMs: config.turn.timeoutSeconds * 1000,
        },
        signal,
        onEvent: async (event) => {
          if (event.type === 'model.step')
            return emit('model.step', { step: event.step, usage: event.usage });
          return emit(event.type, { ...event });
        },
      });
    } catch (err) {
      if (err instanceof BudgetExceededError)
        throw new TurnFailedError(`${err.message}; nothing was committed`);
      throw asTurnError(err, scrub);
    }

    const changed = await changedFiles(this.#workspace, { dir: checkout.dir, signal });
    const usage = {
      inputTokens: result.usage.inputTokens,
      outputTokens: result.usage.outputTokens,
    };
    if (changed.length === 0) {
      await emit('turn.no_changes', {});
      return {
        summary: scrub(result.summary),
        messages: scrubbed(result.turnMessages),
        usage,
        commitSha: null,
      };
    }
    await emit('files.changed', { files: changed.slice(0, 200), count: changed.length });
    signal.throwIfAborted();
    const message = commitMessage(result.summary, job.id, turn.seq, turn.prompt);
    let sha: string | null;
    try {
      sha = await commitAll(this.#workspace, { dir: checkout.dir, message, signal });
      if (sha) {
        await emit('commit', { sha, subject: message.split('\n')[0] });
        signal.throwIfAborted();
        await pushBranch(this.#workspace, {
          dir: checkout.dir,
          repository: job.repository,
          branch: job.branch,
          signal,
        });
        await emit('push', { branch: job.branch, sha });
      }
    } catch (err) {
      throw asTurnError(err, scrub);
    }
    return {
      summary: scrub(result.summary),
      messages: scrubbed(result.turnMessages),
      usage,
      commitSha: sha,
    };
  }

  /** The conversation of the job's earlier finished turns, in order. */
  async #history(jobId: string, seq: number): Promise<ModelMessage[]> {
    const rows = await this.#deps.db
      .selectFrom('turns')
      .select('messages')
      .where('job_id', '=', jobId)
      .where('seq', '<', seq)
      .where('state', '=', 'done')
      .orderBy('seq')
      .execute();
    return rows.flatMap((r) => (Array.isArray(r.messages) ? (r.messages as ModelMessage[]) : []));
  }

  /** HEAD's commit when it carries this turn's trailer, i.e. the turn was pushed already. */
  async #landedCommit(
    dir: string,
    jobId: string,
    seq: number,
    signal: AbortSignal,
  ): Promise<{ sha: string; summary: string } | undefined> {
    const text = await gitOut(this.#workspace, ['log', '-1', '--format=%H%n%B', 'HEAD'], {
      cwd: dir,
      signal,
    });
    const [sha, ...body] = text.split('\n');
    const trailer = `${TURN_TRAILER}: ${jobId}/${seq}`;
    if (!sha || !body.some((line) => line.trim() === trailer)) return undefined;
    return {
      sha,
      summary: body
        .filter((line) => !line.startsWith(`${TURN_TRAILER}:`))
        .join('\n')
        .trim(),
    };
  }
}

function asTurnError(err: unknown, scrub: (text: string) => string): unknown {
  if (err instanceof GitError) {
    const message = scrub(err.message);
    return err.transient
      ? new ExternalError('git', message, { transient: true })
      : new TurnFailedError(message);
  }
  if (err instanceof ExternalError) {
    return err.transient
      ? new ExternalError(err.service, scrub(err.message), { transient: true })
      : new TurnFailedError(scrub(err.message));
  }
  return err;
}
