// The pipeline behind a turn: prepare the job's checkout, run the agent's tool loop with the
// conversation so far, commit what changed, push the work branch and open or update the pull
// request. Every step is safe to repeat: a turn retried after a crash finds its pushed commit
// and does not redo it. It reads no database: the project and the conversation come in its
// input, and what it records goes through the input's callbacks.
import { jobHistory } from '../agent/conversation.ts';
import { BudgetExceededError, type CostBudget, runAgentTurn } from '../agent/loop.ts';
import { ModelError } from '../agent/model-errors.ts';
import type { ModelRegistry } from '../agent/models.ts';
import { modePrompt, writes } from '../agent/modes.ts';
import { buildSystemPrompt, readRepoInstructions, setupNote } from '../agent/prompt.ts';
import { scrubbedModel } from '../agent/scrubbed-model.ts';
import { createRepoTools, createRunCommandTool, RUN_COMMAND } from '../agent/tools/index.ts';
import type { OpenAgentMcp } from '../agent/tools/mcp.ts';
import type { Config } from '../config.ts';
import { type InstallableEngine, installedEngine } from '../engines/catalog.ts';
import { type OpenEngineMcp, unavailableNote } from '../engines/mcp.ts';
import { runEngineTurnWithOutput } from '../engines/output.ts';
import type { Environments } from '../environments/environments.ts';
import type { Emit } from '../events/catalog.ts';
import { compactionSummary } from '../events/declare.ts';
import type { Forges } from '../forges/clients.ts';
import { outputSchemaOf } from '../jobs/output-schema.ts';
import {
  TurnFailedError,
  type TurnInput,
  type TurnOutput,
  type TurnRunner,
} from '../jobs/runner.ts';
import { addTokens, readUsage } from '../jobs/usage.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { engineModeRefusal } from '../projects/engine.ts';
import type { SandboxLimits } from '../projects/limits.ts';
import { commandsNetwork } from '../projects/network.ts';
import { projectCommandLimits } from '../projects/service.ts';
import { sandboxStatus } from '../sandbox/sandbox.ts';
import { type ScrubSecret, scrubSecrets, secretScrubber } from '../secrets/scrub.ts';
import {
  type Checkout,
  changedFiles,
  commitAll,
  engineStateDir,
  type JobLease,
  prepareCheckout,
  pushBranch,
  type WorkspaceConfig,
  withJobLock,
} from '../workspace/index.ts';
import { runAttempts } from './attempts.ts';
import { commitMessage, landedCommit } from './commits.ts';
import { bringBaseIn, concludeResolution, integratedSummary, withConflicts } from './conflict.ts';
import { asTurnError, review, type TurnForge, turnForge } from './forge.ts';
import { turnOutput } from './output.ts';
import { refuseSecretsInPush, secretEnv, secretScrubForms } from './secrets.ts';
import type { AgentOutcome, AgentPlace, TurnCommands, TurnSteps } from './steps.ts';
import { scrubNote, storable, turnScrubbing } from './storable.ts';

export interface TurnPipelineDeps {
  config: Config;
  log: Logger;
  /** Model and forge calls are counted here. */
  metrics: Metrics;
  /** The process's models (the application context's). */
  models: ModelRegistry;
  /** The process's forge clients (the application context's). */
  forges: Forges;
  /** The job's budget and what its turns spent; undefined without one (jobs/spend.ts). */
  jobBudgetLeft: (job: { id: string }) => Promise<JobBudget | undefined>;
  /** The project's monthly budget and what it spent this month; undefined without one. */
  monthBudgetLeft: (job: { id: string }) => Promise<JobBudget | undefined>;
  /** This worker's environment snapshots: restored, or built by the setup command. */
  environments: Environments;
  /** Opens a turn's MCP servers for Errand's agent (features/mcp-servers); without it, none. */
  openAgentMcp?: OpenAgentMcp | undefined;
  /** Opens an engine turn's MCP servers (features/mcp-servers); without it, engines get none. */
  openEngineMcp?: OpenEngineMcp | undefined;
}

type JobBudget = { limitUsd: number; spentUsd: number };

export function workspaceConfig(config: Config): WorkspaceConfig {
  return {
    rootDir: `${config.dataDir}/workspaces`,
    allowLocalRepos: config.allowLocalRepos,
    identity: { name: config.git.authorName, email: config.git.authorEmail },
    inheritedEnv: config.git.inheritedEnv,
  };
}

export class TurnPipeline implements TurnRunner {
  readonly #deps: TurnPipelineDeps;
  readonly #workspace: WorkspaceConfig;

  constructor(deps: TurnPipelineDeps) {
    this.#deps = deps;
    this.#workspace = workspaceConfig(deps.config);
  }

  run(input: TurnInput): Promise<TurnOutput> {
    // The janitor deletes a job's clone only under this lock: held from prepare to push.
    const { job, signal } = input;
    return withJobLock(this.#workspace, job.id, (lease) => this.#run(input, lease), signal);
  }

  async #run(input: TurnInput, lease: JobLease): Promise<TurnOutput> {
    const { job, turn, signal } = input;
    const { config } = this.#deps;
    // Errand's own, the project's (in every form, by name) and, once known, the forge's.
    const secrets: ScrubSecret[] = [...config.secrets, ...secretScrubForms(input.secrets)];
    const { scrub, scrubbed, emit } = turnScrubbing(secrets, input.emit);

    let forge: TurnForge | undefined;
    try {
      forge = await turnForge(this.#deps.forges, input, secrets);
      const checkout = await prepareCheckout(this.#workspace, {
        projectId: job.project_id,
        jobId: job.id,
        repository: job.repository,
        ref: job.ref,
        branch: job.branch,
        ...(forge.auth ? { auth: forge.auth } : {}),
        signal,
        lease,
      });
      await emit('workspace.ready', {
        base: checkout.baseCommit,
        head: checkout.headCommit,
        continued: checkout.branchExisted,
      });

      // A retry after a crash between push and recording the turn: the work already landed,
      // only the pull request may still be missing.
      const landed = await landedCommit(this.#workspace, checkout.dir, job.id, turn.seq, signal);
      if (landed) {
        await emit('turn.resumed', { commit: landed.sha, note: 'this turn was already pushed' });
        // The lost attempt's tool calls are gone; the prompt and its outcome keep the
        // conversation whole for follow-ups.
        const messages = [
          { role: 'user', content: turn.prompt },
          { role: 'assistant', content: landed.summary },
        ];
        // Its value, when it was asked for one, is asked again from that outcome.
        const structured = await turnOutput(this.#deps, input, messages, 0, emit, {
          model: scrubbedModel(this.#deps.models.resolve(job.model), secretScrubber(secrets)),
          system: buildSystemPrompt({
            repository: job.repository,
            branch: job.branch,
            commands: false,
          }),
        });
        const reviewed = await review(
          config,
          this.#workspace,
          input,
          forge,
          checkout,
          landed.summary,
          emit,
          scrub,
        );
        return {
          summary: landed.summary,
          messages: [...messages, ...(structured?.messages ?? [])],
          commitSha: landed.sha,
          usage: structured?.usage ?? null,
          ...reviewed,
          ...(structured ? { output: scrubbed(structured.output) } : {}),
        };
      }

      // A turn the pull request watch queued for a conflict brings the base in first.
      const integration = await bringBaseIn(this.#workspace, input, checkout, emit);
      if (integration && integration.outcome !== 'conflicted') {
        const summary = integratedSummary(job.ref, integration);
        const messages = [
          { role: 'user', content: turn.prompt },
          { role: 'assistant', content: summary },
        ];
        if (!integration.head) return { summary, messages, usage: null, commitSha: null };
        const replaces = integration.outcome === 'rebased' ? checkout.headCommit : undefined;
        const published = await this.#publish(input, checkout, forge, integration.head, summary, {
          emit,
          scrub,
          ...(replaces ? { replaces } : {}),
        });
        return { summary, messages, usage: null, ...published };
      }

      // An ask or a plan turn changes nothing: no commands (a command could write), no setup.
      const mode = turn.mode;
      // A project whose engine changed since the turn was accepted.
      const refusal = engineModeRefusal(input.project.engine, mode);
      if (refusal !== undefined) throw new TurnFailedError(refusal);
      // Best-of-N (docs/eval.md): attempts on clones of their own; the winner is published.
      if (turn.best_of && mode === 'code')
        return await runAttempts(this.#steps(secrets), input, turn.best_of, {
          ...{ forge, emit, scrub, scrubbed, secrets },
        });
      const commands = writes(mode)
        ? await this.#commands(input, checkout, emit, secrets)
        : undefined;
      const agentInput = integration ? withConflicts(input, integration) : input;
      // Everything around the agent is Errand's whichever engine the project runs.
      const place = { dir: checkout.dir, workspaceId: job.id };
      const result = await this.#runAgent(agentInput, place, emit, commands, secrets);
      const summary = scrub(result.summary);
      const usage = result.usage;
      const messages = scrubbed(result.turnMessages);
      // The value asked for (docs/structured-output.md), in every mode, besides what follows.
      const output = result.output && { output: scrubbed(result.output) };
      // Its answer or its plan is the summary; nothing is committed, pushed or opened, and what
      // an engine may have left in the checkout goes with the next turn's reset.
      if (!writes(mode)) return { summary, messages, usage, commitSha: null, ...output };
      const changed = await changedFiles(this.#workspace, { dir: checkout.dir, signal });
      if (changed.length === 0 && !integration) {
        await emit('turn.no_changes', {});
        return { summary, messages, usage, commitSha: null, ...output };
      }
      if (changed.length > 0)
        await emit('files.changed', { files: changed.slice(0, 200), count: changed.length });
      signal.throwIfAborted();
      const message = commitMessage(summary, job.id, turn.seq, scrub(turn.prompt));
      const sha = integration
        ? await concludeResolution(this.#workspace, checkout, integration, message, signal)
        : await commitAll(this.#workspace, { dir: checkout.dir, message, signal });
      if (!sha) return { summary, messages, usage, commitSha: null, ...output };
      await emit('commit', { sha, subject: message.split('\n')[0] ?? '' });
      const published = await this.#publish(input, checkout, forge, sha, summary, { emit, scrub });
      return { summary, messages, usage, ...published, ...output };
    } catch (err) {
      if (err instanceof BudgetExceededError)
        throw new TurnFailedError(`${err.message}; nothing was committed`);
      throw asTurnError(err, scrub, forge);
    }
  }

  /** The steps of a turn, lent to the best-of-N attempts (attempts.ts). */
  #steps(secrets: readonly ScrubSecret[]): TurnSteps {
    const { config, models, environments, log } = this.#deps;
    return {
      config,
      log,
      workspace: this.#workspace,
      models,
      environments,
      commands: (input, checkout, emit) => this.#commands(input, checkout, emit, secrets),
      agent: (input, place, emit, commands) =>
        this.#runAgent(input, place, emit, commands, secrets),
      publish: (input, checkout, forge, sha, summary, emit) =>
        this.#publish(input, checkout, forge, sha, summary, {
          emit,
          scrub: (text) => storable(scrubSecrets(text, secrets)),
        }),
    };
  }

  /** Errand's own loop or the project's engine, whichever `input.project.engine` names. */
  #runAgent(
    input: TurnInput,
    place: AgentPlace,
    emit: Emit,
    commands: TurnCommands | undefined,
    secrets: readonly ScrubSecret[],
  ): Promise<AgentOutcome> {
    const engine = input.project.engine;
    return engine === 'errand'
      ? this.#agent(input, place, emit, commands, secrets)
      : this.#engine(input, engine, place, emit, secrets);
  }

  /**
   * Pushes the turn's commit `sha` (refused when it carries a secret) and opens or updates the
   * pull request. `replaces`: a rebased branch replaces the remote one, if it is still there.
   */
  async #publish(
    input: TurnInput,
    checkout: Checkout,
    forge: TurnForge,
    sha: string,
    summary: string,
    how: { emit: Emit; scrub: (text: string) => string; replaces?: string },
  ): Promise<Pick<TurnOutput, 'commitSha' | 'prLink' | 'prNumber'>> {
    const { job, signal } = input;
    const { emit, scrub } = how;
    signal.throwIfAborted();
    await refuseSecretsInPush(this.#workspace, {
      dir: checkout.dir,
      base: checkout.headCommit,
      head: sha,
      secrets: input.secrets,
      signal,
    });
    await pushBranch(this.#workspace, {
      dir: checkout.dir,
      repository: job.repository,
      branch: job.branch,
      ...(forge.auth ? { auth: forge.auth } : {}),
      ...(how.replaces ? { replaces: how.replaces } : {}),
      signal,
    });
    await emit('push', { branch: job.branch, sha });
    const reviewed = await review(
      this.#deps.config,
      this.#workspace,
      input,
      forge,
      checkout,
      summary,
      emit,
      scrub,
    );
    return { commitSha: sha, ...reviewed };
  }

  /**
   * Whether this turn offers run_command, and the project's environment made for it: each
   * turn's checkout is reset to a pristine tree (ignored files too), which removes what an
   * earlier setup installed, so the environment's snapshot is restored, or the setup command
   * runs and its result is kept (src/environments/). Where the sandbox does not work nothing
   * runs: the turn says why and goes on with the file tools.
   */
  async #commands(
    input: TurnInput,
    checkout: Checkout,
    emit: Emit,
    secrets: readonly ScrubSecret[],
  ): Promise<TurnCommands | undefined> {
    const { project, signal } = input;
    if (!project.commands_enabled) return undefined;
    const status = await sandboxStatus();
    if (!status.available) {
      await emit('sandbox.unavailable', { reason: status.reason, howToFix: status.howToFix });
      return undefined;
    }
    const limits = projectCommandLimits(project);
    const setup = await this.#deps.environments.prepare({
      project,
      secrets: input.secrets,
      dir: checkout.dir,
      baseCommit: checkout.headCommit,
      limits,
      emit,
      signal,
    });
    return { limits, setup: setup && scrubNote(setup, secrets) };
  }

  async #agent(
    input: TurnInput,
    place: AgentPlace,
    emit: Emit,
    commands: TurnCommands | undefined,
    secrets: readonly ScrubSecret[],
  ): Promise<AgentOutcome> {
    const { job, turn, signal } = input;
    const { config } = this.#deps;
    const { metrics } = this.#deps;
    const { dir } = place;
    const repoInstructions = await readRepoInstructions(dir);
    const tools = createRepoTools({ root: dir, signal }, { readOnly: !writes(turn.mode) });
    if (commands) {
      tools[RUN_COMMAND] = createRunCommandTool({
        root: dir,
        limits: commands.limits,
        signal,
        emit,
        secrets,
        secretEnv: secretEnv(input.secrets, 'commands'),
        network: commandsNetwork(input.project),
      });
    }
    const { models } = this.#deps;
    const info = models.info(job.model);
    // Whatever a tool read or the prompt holds, the model gets no secret value.
    const model = scrubbedModel(models.resolve(job.model), secretScrubber(secrets));
    const system = buildSystemPrompt({
      ...(repoInstructions ? { repoInstructions } : {}),
      repository: job.repository,
      branch: job.branch,
      commands: commands !== undefined,
    });
    const mcp = await this.#deps.openAgentMcp?.({
      project: input.project.mcp_servers,
      job: job.mcp_servers,
      secrets: input.secrets,
      readOnly: !writes(turn.mode),
      sandbox: commands
        ? { checkout: dir, limits: commands.limits, network: commandsNetwork(input.project) }
        : undefined,
      signal,
      emit,
      scrub: secretScrubber(secrets),
    });
    // The file tools and run_command keep their names whatever a server's tools are called.
    for (const [name, mcpTool] of Object.entries(mcp?.tools ?? {})) tools[name] ??= mcpTool;
    const notes = [commands?.setup ? setupNote(commands.setup) : undefined, mcp?.note];
    try {
      const result = await runAgentTurn({
        model,
        system,
        history: jobHistory(input.earlier),
        prompt: modePrompt(turn.mode, turn.prompt, input.earlier.length > 0),
        images: input.images,
        note: notes.filter((n) => n !== undefined).join('\n\n') || undefined,
        tools,
        budgets: {
          maxSteps: config.agent.maxSteps,
          maxOutputTokens: config.agent.maxOutputTokens,
          timeoutMs: config.turn.timeoutSeconds * 1000,
        },
        conversation: { windowTokens: info.contextTokens, cacheKey: job.id },
        // A model whose prices are unknown cannot be held to a budget (the settings say so).
        budget: info.prices ? await this.#budget(job, place.budgetShare) : undefined,
        signal,
        onEvent: async (event) => {
          if (event.type === 'model.step') {
            const usage = models.usage(job.model, event.usage);
            metrics.modelStep(job.model, usage);
            return emit('model.step', { step: event.step, usage });
          }
          if (event.type === 'context.compacted') {
            const usage = models.usage(job.model, event.usage);
            metrics.modelStep(job.model, usage);
            const { type, ...data } = event;
            // The facts; `summary` is the catalog's words for them, kept for the API's readers.
            return emit(type, { ...data, usage, summary: compactionSummary(data) });
          }
          return emit(event.type, { ...event });
        },
      }).catch((err: unknown) => {
        if (err instanceof ModelError) metrics.modelError(job.model);
        throw err;
      });
      const structured = await turnOutput(
        this.#deps,
        input,
        result.turnMessages,
        result.steps,
        emit,
        {
          model,
          system,
        },
      );
      if (!structured) return result;
      return {
        ...result,
        usage: addTokens(result.usage, structured.usage),
        turnMessages: [...result.turnMessages, ...structured.messages],
        output: structured.output,
      };
    } finally {
      // Whatever happened, the turn's servers go with it.
      await mcp?.close();
    }
  }

  /**
   * The turn run by a coding CLI (src/engines/) in the sandbox instead of Errand's loop: its
   * summary and usage, and the prompt and summary as the turn's part of the conversation (so
   * that a later turn of Errand's own loop reads the job's history too).
   */
  async #engine(
    input: TurnInput,
    name: InstallableEngine,
    place: AgentPlace,
    emit: Emit,
    secrets: readonly ScrubSecret[],
  ): Promise<AgentOutcome> {
    const { job, turn, project, signal } = input;
    const { config, models, metrics } = this.#deps;
    const engine = await installedEngine(config, name);
    if (!engine) {
      throw new TurnFailedError(
        `engine ${name} is not installed on this worker; run \`errand engine install ${name}\``,
      );
    }
    const status = await sandboxStatus();
    if (!status.available) {
      throw new TurnFailedError(
        `engine ${name} runs only in the sandbox, which is unavailable here: ${status.reason}; ${status.howToFix}`,
      );
    }
    const mcp = await this.#deps.openEngineMcp?.({
      project: project.mcp_servers,
      job: job.mcp_servers,
      secrets: input.secrets,
      readOnly: !writes(turn.mode),
      signal,
      emit,
    });
    const prompt =
      modePrompt(turn.mode, turn.prompt, input.earlier.length > 0) + unavailableNote(mcp);
    const schema = outputSchemaOf(turn);
    const result = await runEngineTurnWithOutput({
      mcp,
      engine,
      readOnly: !writes(turn.mode),
      checkout: place.dir,
      stateDir: engineStateDir(this.#workspace, place.workspaceId),
      model: job.model,
      models: config.models,
      prompt,
      title: turn.prompt,
      earlier: input.earlier,
      limits: engineLimits(projectCommandLimits(project), config.turn.timeoutSeconds),
      signal,
      emit: (type, data) => {
        if (type === 'model.step' && 'usage' in data) {
          const usage = readUsage(data.usage);
          if (usage) metrics.modelStep(job.model, usage);
        }
        return emit(type, data);
      },
      priced: (tokens) => models.usage(job.model, tokens),
      budget: shared(await this.#deps.jobBudgetLeft(job), place.budgetShare),
      monthBudget: await this.#deps.monthBudgetLeft(job),
      maxSteps: config.agent.maxSteps,
      // The engine's shell inherits them; its requests to the model are scrubbed at the proxy.
      secretEnv: secretEnv(input.secrets, 'commands'),
      scrub: secretScrubber(secrets),
      network: commandsNetwork(project),
      outputSchema: schema,
      images: input.images,
      takesImages: models.info(job.model).images,
    }).finally(() => mcp?.close());
    return {
      summary: result.summary,
      usage: result.usage,
      output: result.output,
      turnMessages: [
        { role: 'user', content: prompt },
        { role: 'assistant', content: result.summary },
      ],
    };
  }

  /** The job's budget, read as the turn starts; the turn's steps add their cost to it. */
  async #budget(
    job: { id: string; model: string },
    share: number | undefined,
  ): Promise<CostBudget | undefined> {
    const left = shared(await this.#deps.jobBudgetLeft(job), share);
    if (!left) return undefined;
    const { models } = this.#deps;
    return { ...left, costOf: (usage) => models.costOf(job.model, usage) };
  }
}

/**
 * The project's command limits for an engine's run: the turn's wall time, and CPU time for at
 * least as long, since the engine's own process lives for the whole turn.
 */
function engineLimits(limits: SandboxLimits, timeoutSeconds: number): SandboxLimits {
  return {
    ...limits,
    timeoutSeconds,
    cpuSeconds: Math.max(limits.cpuSeconds, timeoutSeconds),
  };
}

/**
 * An attempt's part of the job's budget (docs/eval.md): what the budget has left, shared
 * equally among the turn's `share` attempts, all of it for the attempt to spend.
 */
function shared(left: JobBudget | undefined, share: number | undefined): JobBudget | undefined {
  if (!left || share === undefined) return left;
  return { limitUsd: Math.max(0, left.limitUsd - left.spentUsd) / share, spentUsd: 0 };
}
